package metrics

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
)

// The monitoring files shipped in the packages (docs/monitoring.md);
// test/monitoring.sh checks them with promtool.
var monitoringDir = filepath.Join("..", "..", "packaging", "monitoring")

// exported is what testdata/agent.prom shows of the agent's series: for
// each series name (a histogram's _bucket, _sum and _count), its label
// names and the values each label takes.
type exported map[string]map[string][]string

func readExported(t *testing.T) exported {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "agent.prom"))
	if err != nil {
		t.Fatal(err)
	}
	fams := parse(t, string(b))
	ex := exported{}
	add := func(name string, labels []*dto.LabelPair) {
		if ex[name] == nil {
			ex[name] = map[string][]string{}
		}
		for _, l := range labels {
			if !slices.Contains(ex[name][l.GetName()], l.GetValue()) {
				ex[name][l.GetName()] = append(ex[name][l.GetName()], l.GetValue())
			}
		}
	}
	for name, fam := range fams {
		for _, m := range fam.GetMetric() {
			if fam.GetType() != dto.MetricType_HISTOGRAM {
				add(name, m.GetLabel())
				continue
			}
			add(name+"_sum", m.GetLabel())
			add(name+"_count", m.GetLabel())
			for _, b := range m.GetHistogram().GetBucket() {
				le := &dto.LabelPair{Name: new("le"), Value: new(model.FloatString(b.GetUpperBound()).String())}
				add(name+"_bucket", append(slices.Clone(m.GetLabel()), le))
			}
			inf := &dto.LabelPair{Name: new("le"), Value: new("+Inf")}
			add(name+"_bucket", append(slices.Clone(m.GetLabel()), inf))
		}
	}
	return ex
}

var (
	selectorRe = regexp.MustCompile(`\b(vmpayload_[a-zA-Z0-9_]+|up)\b(\{[^}]*\})?`)
	matcherRe  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"`)
	groupingRe = regexp.MustCompile(`\b(?:by|on|without|ignoring)\s*\(([^)]*)\)`)
	wordRe     = regexp.MustCompile(`^[a-zA-Z0-9_.+-]+$`)
)

// targetLabels are added by Prometheus to every scraped series.
var targetLabels = []string{"job", "instance"}

// checkExpr reports, for the PromQL expression (or series selector) expr
// found in where, every vmpayload_ metric the agent does not export, every
// label matcher or grouping label it does not have, and every label value
// it does not give. It returns the vmpayload_ metrics expr uses.
func checkExpr(errorf func(format string, args ...any), ex exported, where, expr string) []string {
	var used []string
	labelsOf := map[string]bool{"le": true} // labels of the metrics used, for by/on
	for _, l := range targetLabels {
		labelsOf[l] = true
	}
	for _, m := range selectorRe.FindAllStringSubmatch(expr, -1) {
		name, matchers := m[1], m[2]
		if name == "up" {
			continue // Prometheus's own series of each target
		}
		labels, ok := ex[name]
		if !ok {
			errorf("%s: %s is not a series of the agent (testdata/agent.prom)", where, name)
			continue
		}
		used = append(used, name)
		for l := range labels {
			labelsOf[l] = true
		}
		for _, mm := range matcherRe.FindAllStringSubmatch(matchers, -1) {
			label, op, value := mm[1], mm[2], mm[3]
			if slices.Contains(targetLabels, label) {
				continue
			}
			values, ok := labels[label]
			if !ok {
				errorf("%s: %s has no label %q", where, name, label)
				continue
			}
			alternatives := []string{value}
			if op == "=~" || op == "!~" {
				alternatives = strings.Split(value, "|")
			}
			for _, v := range alternatives {
				v = strings.ReplaceAll(v, `\\`, `\`)
				if !wordRe.MatchString(v) {
					errorf("%s: %s{%s%s%q}: only plain values and alternatives of them can be checked", where, name, label, op, value)
					continue
				}
				if !slices.Contains(values, v) {
					errorf("%s: %s{%s=%q}: the agent gives %s only %v", where, name, label, v, label, values)
				}
			}
		}
	}
	for _, g := range groupingRe.FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(g[1], ",") {
			if l = strings.TrimSpace(l); l != "" && !labelsOf[l] {
				errorf("%s: groups by %q, which none of its metrics has", where, l)
			}
		}
	}
	return used
}

// ruleFile is the part of a Prometheus rule file the test reads.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// ruleTests is the part of a promtool unit test file the test reads.
type ruleTests struct {
	RuleFiles []string `yaml:"rule_files"`
	Tests     []struct {
		Name        string `yaml:"name"`
		InputSeries []struct {
			Series string `yaml:"series"`
		} `yaml:"input_series"`
		AlertRuleTest []struct {
			AlertName string `yaml:"alertname"`
			ExpAlerts []any  `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(false)
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestAlertRules: the packaged alert rules use only metrics, labels and
// label values the agent exports; every alert has a severity, a summary,
// a description and a runbook link to its section of docs/monitoring.md;
// and the promtool unit tests have, for every alert, a case where it fires
// and one where it does not, on series the agent exports.
func TestAlertRules(t *testing.T) {
	ex := readExported(t)
	var rf ruleFile
	readYAML(t, filepath.Join(monitoringDir, "vmpayload.rules.yml"), &rf)
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "monitoring.md"))
	if err != nil {
		t.Fatal(err)
	}
	var alerts []string
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				t.Errorf("group %s: a rule without alert (recording rules are not expected): %q", g.Name, r.Record)
				continue
			}
			if slices.Contains(alerts, r.Alert) {
				t.Errorf("alert %s defined twice", r.Alert)
			}
			alerts = append(alerts, r.Alert)
			if !strings.HasPrefix(r.Alert, "Vmpayload") {
				t.Errorf("alert %s: names start with Vmpayload", r.Alert)
			}
			if used := checkExpr(t.Errorf, ex, "alert "+r.Alert, r.Expr); len(used) == 0 && !strings.Contains(r.Expr, `up{job="vmpayload"}`) {
				t.Errorf("alert %s: the expression uses no metric of the agent: %s", r.Alert, r.Expr)
			}
			if s := r.Labels["severity"]; !slices.Contains([]string{"critical", "warning", "info"}, s) {
				t.Errorf("alert %s: severity %q, want critical, warning or info", r.Alert, s)
			}
			for _, a := range []string{"summary", "description", "runbook_url"} {
				if r.Annotations[a] == "" {
					t.Errorf("alert %s: no %s annotation", r.Alert, a)
				}
			}
			anchor := "docs/monitoring.md#" + strings.ToLower(r.Alert)
			if !strings.HasSuffix(r.Annotations["runbook_url"], anchor) {
				t.Errorf("alert %s: runbook_url %q does not end in %s", r.Alert, r.Annotations["runbook_url"], anchor)
			}
			if !regexp.MustCompile(`(?m)^#+ ` + r.Alert + `$`).Match(doc) {
				t.Errorf("alert %s: docs/monitoring.md has no heading %q", r.Alert, r.Alert)
			}
		}
	}
	if len(alerts) == 0 {
		t.Fatal("no alerts in vmpayload.rules.yml")
	}

	var rt ruleTests
	readYAML(t, filepath.Join(monitoringDir, "vmpayload.rules.test.yml"), &rt)
	if !slices.Equal(rt.RuleFiles, []string{"vmpayload.rules.yml"}) {
		t.Errorf("vmpayload.rules.test.yml tests rule files %v, want [vmpayload.rules.yml]", rt.RuleFiles)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range rt.Tests {
		for _, s := range tc.InputSeries {
			checkExpr(t.Errorf, ex, "unit test "+tc.Name, s.Series)
		}
		for _, a := range tc.AlertRuleTest {
			if !slices.Contains(alerts, a.AlertName) {
				t.Errorf("unit test %s: alert %s is not defined", tc.Name, a.AlertName)
			}
			if len(a.ExpAlerts) > 0 {
				fires[a.AlertName] = true
			} else {
				quiet[a.AlertName] = true
			}
		}
	}
	for _, a := range alerts {
		if !fires[a] {
			t.Errorf("alert %s: no unit test where it fires", a)
		}
		if !quiet[a] {
			t.Errorf("alert %s: no unit test where it stays quiet", a)
		}
	}
}

// dashboard is the part of a Grafana dashboard the test reads.
type dashboard struct {
	UID           string `json:"uid"`
	SchemaVersion int    `json:"schemaVersion"`
	Templating    struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Definition string          `json:"definition"`
			Datasource *datasource     `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		Type       string      `json:"type"`
		Title      string      `json:"title"`
		Datasource *datasource `json:"datasource"`
		Targets    []struct {
			Expr       string      `json:"expr"`
			Datasource *datasource `json:"datasource"`
		} `json:"targets"`
	} `json:"panels"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// TestDashboard: the packaged Grafana dashboard is valid JSON with a
// Prometheus data source variable and an instance variable; every panel
// queries ${datasource}, filters by $instance, and uses only metrics,
// labels and label values the agent exports.
func TestDashboard(t *testing.T) {
	ex := readExported(t)
	b, err := os.ReadFile(filepath.Join(monitoringDir, "vmpayload-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("vmpayload-dashboard.json: %v", err)
	}
	if d.SchemaVersion < 39 || d.UID == "" {
		t.Errorf("schemaVersion %d, uid %q: want >= 39 and a fixed uid", d.SchemaVersion, d.UID)
	}
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		switch v.Name {
		case "datasource":
			var q string
			if v.Type != "datasource" || json.Unmarshal(v.Query, &q) != nil || q != "prometheus" {
				t.Errorf("variable datasource: type %q, query %s; want a prometheus data source variable", v.Type, v.Query)
			}
		case "instance":
			if v.Type != "query" || v.Datasource == nil || v.Datasource.UID != "${datasource}" {
				t.Errorf("variable instance: type %q on %v; want a query on ${datasource}", v.Type, v.Datasource)
			}
			var q string
			if err := json.Unmarshal(v.Query, &q); err != nil {
				t.Errorf("variable instance: query %s: want a string (%v)", v.Query, err)
			}
			for _, e := range []string{q, v.Definition} {
				if used := checkExpr(t.Errorf, ex, "variable instance", e); len(used) == 0 {
					t.Errorf("variable instance: %q names no metric of the agent", e)
				}
			}
		}
		vars[v.Name] = true
	}
	if !vars["datasource"] || !vars["instance"] {
		t.Errorf("variables %v: want datasource and instance", vars)
	}
	exprs := 0
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: data source %v, want ${datasource}", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q: no queries", p.Title)
		}
		for _, q := range p.Targets {
			exprs++
			where := "panel " + p.Title
			if q.Datasource == nil || q.Datasource.UID != "${datasource}" {
				t.Errorf("%s: query data source %v, want ${datasource}", where, q.Datasource)
			}
			used := checkExpr(t.Errorf, ex, where, q.Expr)
			if len(used) == 0 && !strings.Contains(q.Expr, `up{job="vmpayload"`) {
				t.Errorf("%s: %q names no metric of the agent", where, q.Expr)
			}
			for _, m := range selectorRe.FindAllStringSubmatch(q.Expr, -1) {
				if !strings.Contains(m[2], `instance=~"$instance"`) {
					t.Errorf("%s: %s is not filtered by $instance: %s", where, m[0], q.Expr)
				}
			}
		}
	}
	if exprs == 0 {
		t.Error("the dashboard has no queries")
	}
}

// TestCheckExpr: the name and label checks of the monitoring tests catch a
// renamed metric, an unknown label, a value the agent does not give and a
// grouping label no metric has, and pass the real names.
func TestCheckExpr(t *testing.T) {
	ex := readExported(t)
	for _, tc := range []struct {
		expr string
		bad  bool
	}{
		{`sum by (job, instance, dir) (increase(vmpayload_dirs_recreated_total{dir="payload"}[5m]))`, false},
		{`vmpayload_guest_reports_total{status=~"done|degraded|error"}`, false},
		{`vmpayload_job_duration_seconds_bucket{le="+Inf"}`, false},
		{`up{job="vmpayload"} == 0`, false},
		{`vmpayload_jobs_failed_total`, true},                           // not exported
		{`vmpayload_jobs_total{result="failed"}`, true},                 // no such label
		{`vmpayload_jobs_total{outcome="error"}`, true},                 // no such value
		{`vmpayload_guest_reports_total{status=~"done|crashed"}`, true}, // one alternative wrong
		{`vmpayload_job_duration_seconds_bucket{le="7"}`, true},         // no such bucket
		{`sum by (reason) (vmpayload_jobs_total)`, true},                // groups by a label it lacks
		{`vmpayload_job_duration_seconds`, true},                        // a histogram's series have suffixes
	} {
		var errs []string
		checkExpr(func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }, ex, "test", tc.expr)
		if (len(errs) > 0) != tc.bad {
			t.Errorf("checkExpr(%q): errors %q, want errors: %v", tc.expr, errs, tc.bad)
		}
	}
}
