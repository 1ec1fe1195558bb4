package prime

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// resource is a JSON:API resource object; relationships and links are not
// read.
type resource struct {
	Type       string          `json:"type"`
	ID         string          `json:"id"`
	Attributes json.RawMessage `json:"attributes"`
}

// pagination is meta.pagination of a list answer.
type pagination struct {
	Total       int `json:"total"`
	Count       int `json:"count"`
	PerPage     int `json:"per_page"`
	CurrentPage int `json:"current_page"`
	TotalPages  int `json:"total_pages"`
}

// recordPtr is a pointer to a record type that takes its id and raw
// attributes from the resource it was decoded from.
type recordPtr[T any] interface {
	*T
	setResource(id string, raw json.RawMessage)
}

func (j *Job) setResource(id string, raw json.RawMessage)                 { j.ID, j.Raw = id, raw }
func (a *Appointment) setResource(id string, raw json.RawMessage)         { a.ID, a.Raw = id, raw }
func (a *Allocation) setResource(id string, raw json.RawMessage)          { a.ID, a.Raw = id, raw }
func (f *SiteForm) setResource(id string, raw json.RawMessage)            { f.ID, f.Raw = id, raw }
func (e *Estimate) setResource(id string, raw json.RawMessage)            { e.ID, e.Raw = id, raw }
func (c *Contact) setResource(id string, raw json.RawMessage)             { c.ID, c.Raw = id, raw }
func (r *ContactRelationship) setResource(id string, raw json.RawMessage) { r.ID, r.Raw = id, raw }
func (h *StatusHistory) setResource(id string, raw json.RawMessage)       { h.ID, h.Raw = id, raw }

// decode turns a resource into a record: attributes through the record's
// json tags (unknown ones ignored, missing ones left zero), id and raw
// attributes kept.
func decode[T any, PT recordPtr[T]](endpoint string, r resource) (T, error) {
	var v T
	raw := r.Attributes
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		raw = json.RawMessage("{}")
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, fmt.Errorf("prime: %s: decode %s %s: %w", endpoint, r.Type, r.ID, err)
	}
	PT(&v).setResource(r.ID, raw)
	return v, nil
}

// getOne fetches a single-resource document, or reuses the answer of a
// call for the same record (coalesce.go).
func getOne[T any, PT recordPtr[T]](ctx context.Context, c *Client, endpoint, path string) (T, error) {
	v, _, err := getOneAsked[T, PT](ctx, c, endpoint, path)
	return v, err
}

// getOneAsked is getOne, and when the call that Prime answered went out.
func getOneAsked[T any, PT recordPtr[T]](ctx context.Context, c *Client, endpoint, path string) (T, time.Time, error) {
	var zero T
	a, err := c.fetch(ctx, endpoint, endpoint+" "+path, func(ctx context.Context) (Answer, error) {
		body, err := c.get(ctx, endpoint, path)
		return Answer{Pages: [][]byte{body}}, err
	})
	switch {
	case err != nil:
		return zero, time.Time{}, err
	case a.NotFound:
		return zero, time.Time{}, &APIError{StatusCode: http.StatusNotFound, Endpoint: endpoint}
	case len(a.Pages) != 1:
		return zero, time.Time{}, fmt.Errorf("prime: %s: an answer of %d pages for one record", endpoint, len(a.Pages))
	}
	v, err := decodeOne[T, PT](endpoint, a.Pages[0])
	return v, a.Sent, err
}

// decodeOne reads a single-resource document.
func decodeOne[T any, PT recordPtr[T]](endpoint string, body []byte) (T, error) {
	var zero T
	var doc struct {
		Data *resource `json:"data"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return zero, fmt.Errorf("prime: %s: decode: %w", endpoint, err)
	}
	if doc.Data == nil {
		return zero, fmt.Errorf("prime: %s: response has no data", endpoint)
	}
	return decode[T, PT](endpoint, *doc.Data)
}

// getAll fetches every page of a list, following meta.pagination, or reuses
// the answer of a call for the same list (coalesce.go).
func getAll[T any, PT recordPtr[T]](ctx context.Context, c *Client, endpoint, path string, query url.Values) ([]T, error) {
	query.Set("per_page", strconv.Itoa(c.cfg.PageSize))
	key := endpoint + " " + path + "?" + query.Encode()
	a, err := c.fetch(ctx, endpoint, key, func(ctx context.Context) (Answer, error) {
		var a Answer
		for page := 1; ; page++ {
			body, err := getPageBody(ctx, c, endpoint, path, query, page)
			if err != nil {
				return a, err
			}
			a.Pages = append(a.Pages, body)
			if p, err := decodeList(endpoint, page, body); err != nil || p.Last() {
				return a, err
			}
		}
	})
	switch {
	case err != nil:
		return nil, err
	case a.NotFound:
		return nil, &APIError{StatusCode: http.StatusNotFound, Endpoint: endpoint}
	}
	var out []T
	for i, body := range a.Pages {
		p, err := decodePage[T, PT](endpoint, i+1, body)
		if err != nil {
			return nil, err
		}
		out = append(out, p.Records...)
	}
	return out, nil
}

// Page is one page of a list.
type Page[T any] struct {
	Records []T
	// Number is the page's number, from 1; TotalPages is meta.pagination's
	// total_pages (0 when Prime sent no pagination).
	Number, TotalPages int
	// PerPage is meta.pagination's per_page: the size of the list's pages
	// as Prime cut them (0 when Prime sent no pagination).
	PerPage int
}

// Last reports whether no page follows this one.
func (p Page[T]) Last() bool { return len(p.Records) == 0 || p.Number >= p.TotalPages }

// getPage fetches one page of a list: one call.
func getPage[T any, PT recordPtr[T]](ctx context.Context, c *Client, endpoint, path string, query url.Values, page int) (Page[T], error) {
	body, err := getPageBody(ctx, c, endpoint, path, query, page)
	if err != nil {
		return Page[T]{}, err
	}
	return decodePage[T, PT](endpoint, page, body)
}

// getPageBody fetches page number page of a list, as Prime sent it.
func getPageBody(ctx context.Context, c *Client, endpoint, path string, query url.Values, page int) ([]byte, error) {
	query.Set("page", strconv.Itoa(page))
	query.Set("per_page", strconv.Itoa(c.cfg.PageSize))
	return c.get(ctx, endpoint, path+"?"+query.Encode())
}

// decodeList reads page number page of a list document, its records left
// as resources.
func decodeList(endpoint string, page int, body []byte) (Page[resource], error) {
	var doc struct {
		Data []resource `json:"data"`
		Meta struct {
			Pagination *pagination `json:"pagination"`
		} `json:"meta"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return Page[resource]{}, fmt.Errorf("prime: %s: decode page %d: %w", endpoint, page, err)
	}
	p := Page[resource]{Records: doc.Data, Number: page}
	if doc.Meta.Pagination != nil {
		p.TotalPages, p.PerPage = doc.Meta.Pagination.TotalPages, doc.Meta.Pagination.PerPage
	}
	return p, nil
}

// decodePage reads page number page of a list document.
func decodePage[T any, PT recordPtr[T]](endpoint string, page int, body []byte) (Page[T], error) {
	l, err := decodeList(endpoint, page, body)
	if err != nil {
		return Page[T]{}, err
	}
	p := Page[T]{Number: l.Number, TotalPages: l.TotalPages, PerPage: l.PerPage}
	for _, r := range l.Records {
		v, err := decode[T, PT](endpoint, r)
		if err != nil {
			return Page[T]{}, err
		}
		p.Records = append(p.Records, v)
	}
	return p, nil
}

// decodeErrors reads a JSON:API errors document, or an OAuth error
// ({"error","error_description"}), or a bare {"message"}; anything else
// gives none.
func decodeErrors(body []byte) []ErrorObject {
	var doc struct {
		Errors []struct {
			Status json.RawMessage `json:"status"`
			Code   json.RawMessage `json:"code"`
			Title  string          `json:"title"`
			Detail string          `json:"detail"`
		} `json:"errors"`
		Error            string `json:"error"`
		ErrorDescription string `json:"error_description"`
		Message          string `json:"message"`
	}
	if json.Unmarshal(body, &doc) != nil {
		return nil
	}
	var out []ErrorObject
	for _, e := range doc.Errors {
		out = append(out, ErrorObject{Status: scalar(e.Status), Code: scalar(e.Code), Title: e.Title, Detail: e.Detail})
	}
	if doc.Error != "" || doc.ErrorDescription != "" {
		out = append(out, ErrorObject{Code: doc.Error, Detail: doc.ErrorDescription})
	}
	if len(out) == 0 && doc.Message != "" {
		out = append(out, ErrorObject{Detail: doc.Message})
	}
	return out
}

// scalar reads a JSON string or number as text.
func scalar(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return strings.TrimSpace(string(raw))
}

// FromResource decodes a record from a JSON:API resource's id and
// attributes, as a stage does with a record another stage fetched
// (events.Resource): prime.FromResource[prime.Job](id, attributes).
func FromResource[T any, PT recordPtr[T]](id string, attributes json.RawMessage) (T, error) {
	return decode[T, PT]("resource", resource{ID: id, Attributes: attributes})
}
