package primesim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"

	"github.com/ethosbuilding/primeflow/pkg/datadir"
)

// savedState is what a Sim keeps in Options.StateFile: its records, the
// counters of the numeric references and job numbers it hands out, and
// its generators' random source, so that a Sim started again from the file
// serves what it served before and never makes an id it made already.
type savedState struct {
	NextRef int64 `json:"nextRef"`
	NextJob int64 `json:"nextJob"`
	// Source is the generators' PCG, marshalled.
	Source  []byte  `json:"source"`
	Records Fixture `json:"records"`
}

// restore loads the state file when there is one; ok is false when there
// is none yet.
func (s *Sim) restore() (ok bool, err error) {
	b, err := os.ReadFile(s.opts.StateFile)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("primesim: state: %w", err)
	}
	var saved savedState
	if err := json.Unmarshal(b, &saved); err != nil {
		return false, fmt.Errorf("primesim: state %s: %w (remove it to start again from the fixture)", s.opts.StateFile, err)
	}
	st := newStore()
	if err := st.load(saved.Records); err != nil {
		return false, fmt.Errorf("primesim: state %s: %w", s.opts.StateFile, err)
	}
	src := &rand.PCG{}
	if err := src.UnmarshalBinary(saved.Source); err != nil {
		return false, fmt.Errorf("primesim: state %s: source: %w", s.opts.StateFile, err)
	}
	s.mu.Lock()
	s.nextRef, s.nextJob = saved.NextRef, saved.NextJob
	s.useLocked(st)
	s.mu.Unlock()
	s.rngMu.Lock()
	s.src, s.rng = src, rand.New(src)
	s.rngMu.Unlock()
	return true, nil
}

// saveLocked writes the state file, when there is one; s.mu is held. A
// write that fails is logged: the simulator serves on from memory.
func (s *Sim) saveLocked() {
	if s.opts.StateFile == "" {
		return
	}
	saved := savedState{NextRef: s.nextRef, NextJob: s.nextJob, Records: Fixture{}}
	for _, k := range Kinds() {
		for _, e := range s.store.list(k, nil) {
			saved.Records[k] = append(saved.Records[k], s.store.record(k, e))
		}
	}
	s.rngMu.Lock()
	src, err := s.src.MarshalBinary()
	s.rngMu.Unlock()
	if err == nil {
		saved.Source = src
		var b []byte
		if b, err = json.Marshal(saved); err == nil {
			err = datadir.WriteFile(s.opts.StateFile, b)
		}
	}
	if err != nil {
		s.log.Error("primesim: state not saved: a restart serves what was saved last", "file", s.opts.StateFile, "err", err)
	}
}
