package cloudinit

import "github.com/vmpayload/vmpayload/payload/job"

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
