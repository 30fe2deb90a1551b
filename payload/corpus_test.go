package payload_test

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/vmpayload/vmpayload/payload"
	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/payloadtest"
	"github.com/vmpayload/vmpayload/test/judge"
)

// cloudInitExamples is where Debian's cloud-init package installs the
// examples of cloud-init's documentation (some gzip-compressed by the
// packaging, which cloud-init reads as it reads any gzip user-data). They
// are read at test time, never copied into this repository.
const cloudInitExamples = "/usr/share/doc/cloud-init/examples"

// corpusRefusals are the examples vmpayload refuses, with why: cloud-init
// itself ignores them, and the refusal message must say so.
var corpusRefusals = map[string]string{
	// "#ignored": no type cloud-init knows; its walker drops the part
	"plain-ignored.txt": "cloud-init would ignore",
	// prose about the kernel command line, not user-data of any type
	"kernel-cmdline.txt": "cloud-init would ignore",
}

// TestCloudInitExamplesCorpus carries every example shipped with the
// installed cloud-init through build in both formats, both media, both
// user-data modes and as vendor-data, and holds each image to the rule
// (ruleCheck): replace mode byte-identical, merge mode everything of both
// sides in cloud-init's effective config, vendor-data as given.
func TestCloudInitExamplesCorpus(t *testing.T) {
	if err := judge.CheckEnvironment(context.Background()); err != nil {
		t.Fatalf("the cloud-init judge cannot run here (make test installs it): %v", err)
	}
	var names []string
	err := filepath.WalkDir(cloudInitExamples, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() && filepath.Base(p) != "README" && p != filepath.Join(cloudInitExamples, "seed", "meta-data") {
			rel, _ := filepath.Rel(cloudInitExamples, p)
			names = append(names, rel)
		}
		return nil
	})
	if err != nil || len(names) < 30 {
		t.Fatalf("reading the examples of the installed cloud-init package in %s: %d files, %v (is cloud-init installed with its documentation? dpkg path-exclude of /usr/share/doc removes them)", cloudInitExamples, len(names), err)
	}
	sort.Strings(names)
	var carried, refused []string
	results := make([]string, len(names))
	t.Run("inputs", func(t *testing.T) {
		for i, name := range names {
			i, name := i, name
			t.Run(strings.ReplaceAll(name, "/", "_"), func(t *testing.T) {
				t.Parallel()
				data, err := os.ReadFile(filepath.Join(cloudInitExamples, name))
				if err != nil {
					t.Fatal(err)
				}
				errs := ruleCheck(t, ruleInput{name: name, data: data}, allCarries())
				reason, wantRefused := corpusRefusals[name]
				for c, err := range errs {
					switch {
					case wantRefused && err == nil:
						t.Errorf("%s: carried, but the corpus lists it as refused (%s)", c, reason)
					case wantRefused && !strings.Contains(err.Error(), reason):
						t.Errorf("%s: refused with %q, want the reason %q", c, err, reason)
					case !wantRefused && err != nil:
						t.Errorf("%s: refused: %v", c, err)
					}
				}
				if wantRefused {
					results[i] = "refused"
				} else {
					results[i] = "carried"
				}
			})
		}
	})
	for i, r := range results {
		switch r {
		case "carried":
			carried = append(carried, names[i])
		case "refused":
			refused = append(refused, names[i]+" ("+corpusRefusals[names[i]]+")")
		}
	}
	t.Logf("cloud-init examples: %d carried in %d carriages each, %d refused: %s", len(carried), len(allCarries()), len(refused), strings.Join(refused, "; "))
}

// TestCloudInitSeedMetaData carries the example NoCloud seed's meta-data
// (EC2-style, NoCloud spelling) as meta_data in both formats: cloud-init
// must read its instance-id, local-hostname and public keys from both.
func TestCloudInitSeedMetaData(t *testing.T) {
	ctx := context.Background()
	raw, err := os.ReadFile(filepath.Join(cloudInitExamples, "seed", "meta-data"))
	if err != nil {
		t.Fatalf("reading the installed cloud-init's example seed: %v", err)
	}
	var md map[string]any
	if err := yaml.Unmarshal(raw, &md); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var paths []string
	for _, f := range []job.Format{job.FormatNoCloud, job.FormatConfigDrive} {
		j := &job.Job{Version: 1, Format: f, MetaData: md, Timezone: "UTC"}
		p := filepath.Join(dir, string(f)+".iso")
		if _, err := payloadtest.Build(ctx, j, "", p, payload.Options{GID: -1}); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		paths = append(paths, p)
	}
	reps, err := judge.JudgeMany(ctx, paths, judge.Options{NoSchema: true})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range reps {
		if r.InstanceID != md["instance-id"] || r.Hostname != md["local-hostname"] || len(r.PublicKeys) == 0 {
			t.Errorf("%s: cloud-init read instance-id %q hostname %q keys %q, want %v %v and the seed's key (errors %q)",
				paths[i], r.InstanceID, r.Hostname, r.PublicKeys, md["instance-id"], md["local-hostname"], r.AllErrors())
		}
	}
}
