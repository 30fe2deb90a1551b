package agenttest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/vmpayload/vmpayload/agent/api/client"
	"github.com/vmpayload/vmpayload/agent/result"
)

// ErrNotFinal is returned by WaitFinal when the job is still not final
// after the given number of waits.
var ErrNotFinal = errors.New("job not final")

// WaitFinal waits with c (?wait=each, up to tries times) for job id to
// reach a final state and returns its result.
func WaitFinal(ctx context.Context, c *client.Client, id string, each time.Duration, tries int) (result.Result, error) {
	for range tries {
		res, _, err := c.Job(ctx, id, client.JobQuery{Wait: each})
		if err != nil {
			return res, fmt.Errorf("asking for job %s: %w", id, err)
		}
		if res.State.Final() {
			return res, nil
		}
	}
	return result.Result{}, fmt.Errorf("job %s after %d waits of %v: %w", id, tries, each, ErrNotFinal)
}

// ErrNoMetric is returned by Metric when no sample matches.
var ErrNoMetric = errors.New("not in /metrics")

// Metric returns the value of the first sample of the metric name in the
// /metrics c reads whose line contains every string of labels (such as
// `outcome="done"`).
func Metric(ctx context.Context, c *client.Client, name string, labels ...string) (float64, error) {
	status, b, err := c.Raw(ctx, http.MethodGet, "/metrics", nil)
	if err != nil || status != http.StatusOK {
		return 0, fmt.Errorf("GET /metrics: HTTP %d: %w", status, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), client.MaxAnswerBytes)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+" ") && !strings.HasPrefix(line, name+"{") {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(line, l)
		}
		if !ok {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("metric line %q: %w", line, err)
		}
		return v, nil
	}
	return 0, fmt.Errorf("metric %s%v: %w", name, labels, ErrNoMetric)
}
