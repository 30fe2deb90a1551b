package cloudinit

import (
	"fmt"

	"github.com/vmpayload/vmpayload/payload/internal/ignition"
	"github.com/vmpayload/vmpayload/payload/job"
)

// IgnitionConfigName is the file name of an Ignition config delivered by
// fw_cfg (what `vmpayload build` writes); IgnitionFile returns where the
// config goes for each delivery.
const IgnitionConfigName = "config.ign"

// IgnitionFile is the path of the Ignition config for delivery d: the
// file itself for fwcfg, user-data inside a cidata image, and
// openstack/latest/user_data inside a config-2 image.
func IgnitionFile(d job.IgnitionDelivery) string {
	switch d {
	case job.DeliveryConfigDrive:
		return configDriveDir + "user_data"
	case job.DeliveryNoCloud:
		return "user-data"
	}
	return IgnitionConfigName
}

// renderIgnition fills docs with the Ignition config of j (format
// "ignition"): the config generated from its fields with the user's
// config merged in (package ignition), as the one file its delivery
// needs.
func renderIgnition(docs *Documents, j *job.Job, hashes []string, keys []HostKey) error {
	in := ignition.Input{Job: *j, PasswordHashes: hashes}
	for _, k := range keys {
		in.HostKeys = append(in.HostKeys, ignition.HostKey{Type: k.Type, Private: k.Private, Public: k.Public})
	}
	b, spec, err := ignition.Render(in)
	if err != nil {
		return fmt.Errorf("rendering: %w", err)
	}
	docs.IgnitionSpec = spec.String()
	docs.Files = append(docs.Files, File{IgnitionFile(j.IgnitionDelivery), b})
	return nil
}
