package cloudinit

import (
	"fmt"

	"github.com/vmpayload/vmpayload/payload/guestreport"
	"github.com/vmpayload/vmpayload/payload/job"
)

// addReporter adds the guest reporter to a job's documents and returns the
// user-data to write. The reporter is a boothook part: cloud-init runs it
// whatever the cloud-config parts say, so no cloud-config key of the user's
// can turn it off. With user_data_mode merge (or no user-data of the
// user's) it is the first part of the user-data. With replace the user-data
// stays verbatim, as that mode promises, and the reporter is the first part
// of the vendor-data (j.VendorData, before any of the job's own); a
// replace-mode cloud-config that turns vendor-data off would drop it, and
// the check refuses it (job.CheckReporterUserData).
func addReporter(j *job.Job, user string, userData []byte, contentHash string) ([]byte, error) {
	if j.UserDataMode != job.ModeReplace || user == "" {
		return withReporter(userData, contentHash)
	}
	// vendor_data or vendor_data_base64 (gzip data decompressed: the
	// reporter's part joins the text cloud-init reads)
	text, err := job.UserDataText(j.VendorDataRaw())
	if err != nil {
		return nil, fmt.Errorf("adding the guest reporter to the vendor-data: %w", err)
	}
	vd, err := withReporter([]byte(text), contentHash)
	if err != nil {
		return nil, err
	}
	j.VendorData, j.VendorDataBase64 = string(vd), ""
	return userData, nil
}

// withReporter makes userData a MIME multipart document whose first part is
// the guest reporter (guestreport.Boothook) and whose other parts are
// userData's (its own parts when it is multipart already, else userData as
// one part). A boothook part is run by cloud-init whatever the cloud-config
// parts say, so the user's user-data — merged or in replace mode — cannot
// turn the reporter off by a cloud-config key.
func withReporter(userData []byte, contentHash string) ([]byte, error) {
	parts := []job.Part{partFor(guestreport.Boothook(), "vmpayload-guest-report")}
	doc := string(userData)
	if doc == "" {
		// nothing else: the boothook alone
	} else if job.ClassifyUserData(doc) == job.KindMultipart {
		up, err := job.SplitMIME(doc)
		if err != nil {
			return nil, fmt.Errorf("adding the guest reporter to the user-data: %w", err)
		}
		parts = append(parts, up...)
	} else {
		parts = append(parts, partFor(doc, "user-data"))
	}
	b, err := job.JoinMultipart(parts, "vmpayload-report-"+contentHash[:24])
	if err != nil {
		return nil, fmt.Errorf("adding the guest reporter to the user-data: %w", err)
	}
	return b, nil
}
