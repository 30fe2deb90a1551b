package image

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
)

// Benchmarks run the full Write (build, write, fsync, read back, verify,
// rename, fsync dir) and, for comparison, the in-memory build alone and the
// peer tool genisoimage on the same files in the same run.

var benchSpecs = []struct {
	name string
	spec Spec
}{
	{"cidata", Spec{MediaISO, "cidata", cidataEntries()}},
	{"config-2", Spec{MediaISO, "config-2", config2Entries()}},
}

func BenchmarkWriteISO(b *testing.B) {
	for _, bs := range benchSpecs {
		b.Run(bs.name, func(b *testing.B) { benchWrite(b, bs.spec) })
		for _, v := range []struct {
			name string
			v    isoVariant
		}{{"build-only", isoJolietTree}, {"build-only-godiskfs-layout", isoCurrent}} {
			// the layout of new images (with the Joliet tree), and the one
			// before issue 35 (old recipes)
			b.Run(bs.name+"/"+v.name, func(b *testing.B) {
				dirs, err := validateSpec(bs.spec)
				if err != nil {
					b.Fatal(err)
				}
				for b.Loop() {
					if _, err := buildISO(context.Background(), bs.spec, dirs, v.v); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		// the go-diskfs path the in-memory writer replaced (now the tests' oracle)
		b.Run(bs.name+"/build-only-diskfs", func(b *testing.B) {
			dirs, err := validateSpec(bs.spec)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				buildISODiskfs(b, bs.spec, dirs)
			}
		})
	}
}

func BenchmarkWriteVFAT(b *testing.B) {
	for _, bs := range benchSpecs {
		spec := bs.spec
		spec.Media = MediaVFAT
		b.Run(bs.name, func(b *testing.B) { benchWrite(b, spec) })
	}
}

func benchWrite(b *testing.B, spec Spec) {
	out := filepath.Join(b.TempDir(), "payload.img")
	ctx := context.Background()
	for b.Loop() {
		if _, err := Write(ctx, spec, out, Options{GID: -1}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGenisoimage is the peer: what oVirt/Proxmox/cloud-localds do.
func BenchmarkGenisoimage(b *testing.B) {
	needTool(b, "genisoimage", "genisoimage")
	for _, bs := range benchSpecs {
		b.Run(bs.name, func(b *testing.B) {
			src := b.TempDir()
			writeTree(b, src, bs.spec.Entries)
			out := filepath.Join(b.TempDir(), "payload.iso")
			for b.Loop() {
				cmd := exec.Command("genisoimage", "-quiet", "-o", out, "-J", "-r", "-V", bs.spec.Label, src)
				if o, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("genisoimage: %v\n%s", err, o)
				}
			}
		})
	}
}

// BenchmarkInspectISO reads a built ISO image back the way `vmpayload
// inspect` and the agent's prebuilt-image check do (Inspect: hash, label,
// file list) and one file the way `inspect --cat` and the recipe's seed
// check do (ReadFile).
func BenchmarkInspectISO(b *testing.B) {
	for _, bs := range benchSpecs {
		p := filepath.Join(b.TempDir(), "payload.iso")
		if _, err := Write(context.Background(), bs.spec, p, Options{GID: -1, NoSync: true}); err != nil {
			b.Fatal(err)
		}
		b.Run(bs.name+"/inspect", func(b *testing.B) {
			for b.Loop() {
				if _, err := Inspect(p); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(bs.name+"/readfile", func(b *testing.B) {
			for b.Loop() {
				if _, err := ReadFile(p, bs.spec.Entries[0].Path); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
