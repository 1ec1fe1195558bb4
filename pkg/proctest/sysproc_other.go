//go:build unix && !linux

package proctest

import "syscall"

// sysProcAttr puts the process in a group of its own, so that Kill takes
// whatever it started too.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
