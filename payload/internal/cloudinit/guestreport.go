package cloudinit

import (
	"fmt"
	"strings"

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
// replace-mode cloud-config that turns vendor-data off (vendor_data:
// {enabled: false}) would drop it, and is refused with guest_report on.
func addReporter(j *job.Job, user string, userData []byte, contentHash string) ([]byte, error) {
	if j.UserDataMode != job.ModeReplace || user == "" {
		return withReporter(userData, contentHash)
	}
	if text, err := job.UserDataText(user); err == nil && job.ClassifyUserData(text) == job.KindCloudConfig {
		if m, err := job.ParseYAMLMap(text); err == nil {
			if vd, ok := m["vendor_data"].(map[string]any); ok && isFalse(vd["enabled"]) {
				return nil, (&job.Report{Errors: []job.FieldError{{Field: "guest_report", Code: job.CodeConflict,
					Message: "with user_data_mode replace the guest reporter travels in vendor-data, which this user-data turns off (vendor_data: {enabled: false}); set guest_report to false, or use user_data_mode merge"}}}).Err()
			}
		}
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

// isFalse is cloud-init's util.is_false for a YAML value.
func isFalse(v any) bool {
	switch v := v.(type) {
	case bool:
		return !v
	case string:
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "false", "0", "off", "no":
			return true
		}
	}
	return false
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
