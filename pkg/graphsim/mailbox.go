package graphsim

import (
	"fmt"
	"net/http"
	"strings"
)

// DeleteFolder deletes a folder by path, with its messages and every
// folder in it, as a person can in Outlook: a call that names it (by the
// id it had) is answered 404 from then on. It returns the messages deleted
// with it. The inbox cannot be deleted.
func (s *Sim) DeleteFolder(path string) ([]Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.folderByPath(path)
	switch {
	case f == nil:
		return nil, fmt.Errorf("graphsim: no folder %q", path)
	case f.id == s.inbox:
		return nil, fmt.Errorf("graphsim: the inbox cannot be deleted")
	}
	doomed := map[string]bool{f.id: true}
	for grew := true; grew; {
		grew = false
		for id, g := range s.folders {
			if !doomed[id] && doomed[g.parent] {
				doomed[id], grew = true, true
			}
		}
	}
	var gone []Message
	for id := range doomed {
		for _, m := range s.folders[id].messages {
			c := *m
			c.Folder = s.path(s.folders[id])
			gone = append(gone, c)
		}
	}
	for id := range doomed {
		delete(s.folders, id)
	}
	return gone, nil
}

// handleGetMessage serves a message by its id, in whichever folder it is,
// with the fields $select names (parentFolderId among them).
func (s *Sim) handleGetMessage() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fields := append([]string{"parentFolderId"}, messageFields...)
		if sel := r.URL.Query().Get("$select"); sel != "" {
			fields = strings.Split(sel, ",")
		}
		s.mu.Lock()
		var body map[string]any
		for _, f := range s.folders {
			for _, m := range f.messages {
				if m.ID == r.PathValue("id") {
					body = selectFields(m, f.id, fields)
				}
			}
		}
		s.mu.Unlock()
		if body == nil {
			writeGraphError(w, http.StatusNotFound, "ErrorItemNotFound", "The specified object was not found in the store.")
			return
		}
		writeJSON(w, http.StatusOK, body)
	})
}

func (s *Sim) handleDeleteFolder() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := s.DeleteFolder(r.URL.Query().Get("path")); err != nil {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// pad pads a body to n bytes: with an HTML comment after it, or spaces for
// text.
func pad(body, contentType string, n int) string {
	if n <= len(body) {
		return body
	}
	if contentType == "text" || n-len(body) < len("<!---->") {
		return body + strings.Repeat(" ", n-len(body))
	}
	return body + "<!--" + strings.Repeat("x", n-len(body)-len("<!---->")) + "-->"
}
