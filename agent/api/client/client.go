// Package client talks to the agent's HTTP/1.1 + JSON API on its unix
// socket (see package api for the routes). The vmpayload CLI (submit,
// status, run) and every test that drives an agent use it, so there is one
// place that knows how to dial the socket and decode the answers.
//
// It imports only the API's wire types (result.Result, job.FieldError).
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/payload/job"
)

// MaxAnswerBytes bounds how much of an answer the client reads.
const MaxAnswerBytes = 8 << 20

// Client sends requests to one agent socket. Its zero value is not usable;
// call New.
type Client struct {
	socket string
	target Target // set by Connect
	http   *http.Client
}

// New returns a client for the agent listening on the unix socket path.
// It sets no overall timeout: callers bound requests with their context.
func New(socket string) *Client {
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}}
	return &Client{socket: socket, http: &http.Client{Transport: tr}}
}

// Socket is the path the client dials.
func (c *Client) Socket() string { return c.socket }

// HTTP is the underlying HTTP client, for requests the methods below do not
// cover (streaming /v1/events, raw bodies, headers); URLs it is given must
// be built with URL.
func (c *Client) HTTP() *http.Client { return c.http }

// CloseIdleConnections closes the kept-alive connections, so that the
// next request dials the socket again.
func (c *Client) CloseIdleConnections() { c.http.CloseIdleConnections() }

// URL is the URL of path (with its query) on the agent's socket.
func URL(path string) string { return "http://vmpayload" + path }

// Answer is the agent's JSON answer to a submission or a refused request:
// ID (and State) on 202, Error and, for 400/403/413, Errors otherwise. The
// API server writes its answers with this type, so client and server share
// one wire shape.
type Answer struct {
	ID     string           `json:"id,omitempty"`
	State  result.State     `json:"state,omitempty"`
	Error  string           `json:"error,omitempty"`
	Errors []job.FieldError `json:"errors,omitempty"`
}

// Raw sends one request and returns the status and the body (at most
// MaxAnswerBytes). A status of 0 with an error means no agent answered
// (nothing listens on the socket, or the connection failed).
func (c *Client) Raw(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, URL(path), rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, c.transportError(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswerBytes))
	return resp.StatusCode, b, err
}

// transportError is err as the caller shows it: for a client made by
// Connect, the *RemoteError or the dial error itself, prefixed with the
// target, rather than the URL the transport names.
func (c *Client) transportError(err error) error {
	if c.target.Scheme == "" {
		return err
	}
	var re *RemoteError
	if errors.As(err, &re) {
		return re
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return fmt.Errorf("%s: %w", c.target.Name(), err)
}

// Do sends one request and decodes the JSON answer into out (when not nil)
// whatever the status. A status of 0 with an error means no agent answered.
func (c *Client) Do(ctx context.Context, method, path string, body []byte, out any) (int, error) {
	status, b, err := c.Raw(ctx, method, path, body)
	if err != nil {
		return status, err
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return status, fmt.Errorf("decoding the agent's answer (HTTP %d): %w", status, err)
		}
	}
	return status, nil
}

// Submit posts a job document to /v1/jobs. The agent answers 202 with the
// job's id, 400 or 403 with the fields it refuses, or another status with
// an error.
func (c *Client) Submit(ctx context.Context, data []byte) (Answer, int, error) {
	var ans Answer
	status, err := c.Do(ctx, http.MethodPost, "/v1/jobs", data, &ans)
	return ans, status, err
}

// JobQuery says how GET /v1/jobs/{id} answers.
type JobQuery struct {
	// Wait, when positive, blocks until the job is final (or, with Guest,
	// its guest report is in) or Wait has passed.
	Wait time.Duration
	// Guest waits for the guest's provisioning report (for=guest).
	Guest bool
}

// JobPath is the API path of job id with q's query.
func JobPath(id string, q JobQuery) string {
	p := "/v1/jobs/" + url.PathEscape(id)
	var v []string
	if q.Wait > 0 {
		v = append(v, "wait="+q.Wait.String())
	}
	if q.Guest {
		v = append(v, "for=guest")
	}
	if len(v) > 0 {
		p += "?" + strings.Join(v, "&")
	}
	return p
}

// StatusError is an answer with another status than the method expects:
// the status and the agent's error message.
type StatusError struct {
	Status  int
	Message string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("the agent answered %d: %s", e.Status, e.Message)
}

// Job fetches the state or result of job id. Any answer but 200 is a
// *StatusError (404: the agent does not know the job).
func (c *Client) Job(ctx context.Context, id string, q JobQuery) (result.Result, int, error) {
	status, b, err := c.Raw(ctx, http.MethodGet, JobPath(id, q), nil)
	if err != nil {
		return result.Result{}, status, err
	}
	if status != http.StatusOK {
		var ans Answer
		_ = json.Unmarshal(b, &ans) // the message is optional
		return result.Result{}, status, &StatusError{Status: status, Message: ans.Error}
	}
	var res result.Result
	if err := json.Unmarshal(b, &res); err != nil {
		return res, status, fmt.Errorf("decoding the agent's answer (HTTP %d): %w", status, err)
	}
	return res, status, nil
}

// Jobs lists the recent jobs of the agent's current run.
func (c *Client) Jobs(ctx context.Context) ([]result.Result, error) {
	var list struct {
		Jobs []result.Result `json:"jobs"`
	}
	if _, err := c.Do(ctx, http.MethodGet, "/v1/jobs", nil, &list); err != nil {
		return nil, err
	}
	return list.Jobs, nil
}

// Health asks /healthz; the agent answers 200 when it is running and
// connected, with a JSON object describing its state.
func (c *Client) Health(ctx context.Context) (int, map[string]any, error) {
	var h map[string]any
	status, err := c.Do(ctx, http.MethodGet, "/healthz", nil, &h)
	return status, h, err
}
