package cloudinit

import (
	"fmt"

	"github.com/vmpayload/vmpayload/payload/guestreport"
	"github.com/vmpayload/vmpayload/payload/job"
)

// withReporter makes userData a MIME multipart document whose first part is
// the guest reporter (guestreport.Boothook) and whose other parts are
// userData's (its own parts when it is multipart already, else userData as
// one part). A boothook part is run by cloud-init whatever the cloud-config
// parts say, so the user's user-data — merged or in replace mode — cannot
// turn the reporter off by a cloud-config key.
func withReporter(userData []byte, contentHash string) ([]byte, error) {
	parts := []Part{partFor(guestreport.Boothook(), "vmpayload-guest-report")}
	doc := string(userData)
	if job.ClassifyUserData(doc) == job.KindMultipart {
		up, err := SplitMultipart(doc)
		if err != nil {
			return nil, fmt.Errorf("adding the guest reporter to the user-data: %w", err)
		}
		parts = append(parts, up...)
	} else {
		parts = append(parts, partFor(doc, "user-data"))
	}
	b, err := JoinMultipart(parts, "vmpayload-report-"+contentHash[:24])
	if err != nil {
		return nil, fmt.Errorf("adding the guest reporter to the user-data: %w", err)
	}
	return b, nil
}
