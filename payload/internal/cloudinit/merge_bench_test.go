package cloudinit_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/payload"
	"github.com/vmpayload/vmpayload/payload/job"
)

// BenchmarkRenderMerge checks and renders a merge-mode job whose #cloud-config
// user-data carries 2000 write_files entries (about 1 MB).
func BenchmarkRenderMerge(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("#cloud-config\nwrite_files:\n")
	for i := 0; i < 2000; i++ {
		fmt.Fprintf(&sb, "  - path: /etc/f%d\n    permissions: '0644'\n    content: |\n      %s\n", i, strings.Repeat("x", 450))
	}
	ud := sb.String()
	j := job.Job{Version: 1, Hostname: "bench", Runcmd: []job.Command{{Shell: "echo a"}}, UserData: ud}
	b.SetBytes(int64(len(ud)))
	for i := 0; i < b.N; i++ {
		if _, err := render(j, payload.Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
