// Which delivery a job's payload takes, and into which drive: the one
// place the engine asks what kind of payload it runs. (The payload kinds
// of issue 40 answer this: Rendered.Delivery.)

package engine

import (
	"github.com/vmpayload/vmpayload/agent/delivery"
	"github.com/vmpayload/vmpayload/agent/delivery/drive"
	"github.com/vmpayload/vmpayload/agent/delivery/fwcfg"
	"github.com/vmpayload/vmpayload/agent/delivery/smbios"
	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/libvirtx/domxml"
	"github.com/vmpayload/vmpayload/payload"
	"github.com/vmpayload/vmpayload/payload/image"
	"github.com/vmpayload/vmpayload/payload/kinds"
)

// deliveryName is the delivery of the rendered payload, as its kind says
// (Rendered.Delivery; "drive" for a prebuilt image, rd nil): "fwcfg" for
// files behind fw_cfg, "smbios" for strings in the SMBIOS table, else
// "drive".
func deliveryName(rd *payload.Rendered) string {
	if rd == nil {
		return drive.Name
	}
	switch rd.Delivery() {
	case kinds.DeliveryFwCfg:
		return fwcfg.Name
	case kinds.DeliverySMBIOS:
		return smbios.Name
	}
	return drive.Name
}

// route is how a job's payload reaches the domain.
type route struct {
	// delivery is the delivery's registry name (deliveryName).
	delivery string
	// names are the names the payload file goes under (fw_cfg names).
	names []string
	// noun is what messages call the payload file.
	noun string
}

// routeOf returns the route of the rendered payload (nil: a prebuilt
// image).
func routeOf(rd *payload.Rendered) route {
	rt := route{delivery: deliveryName(rd), noun: "payload image"}
	switch {
	case rd != nil && rd.Shape() != payload.ShapeImage:
		// named values: each part under its own name (Rendered.Parts), or
		// no file at all
		rt.noun = "credentials"
	case rt.delivery == fwcfg.Name:
		rt.names, rt.noun = domxml.IgnitionFwCfgNames, "Ignition config"
	}
	return rt
}

// driveOf is the drive an image goes into, by the rendered job (nil: a
// prebuilt image) and the image's description pl, as the payload's kind
// says (Rendered.Delivery, Image.Delivery).
func driveOf(rd *payload.Rendered, pl *result.Payload) delivery.Drive {
	d := ""
	if rd != nil {
		d = rd.Delivery()
	} else if pl != nil {
		d = pl.Image.Delivery()
	}
	switch {
	case d == kinds.DeliveryBlockdev:
		return delivery.DriveSerialDisk
	case d == kinds.DeliveryFloppy:
		return delivery.DriveFloppy
	case pl != nil && pl.Media == string(image.MediaVFAT):
		return delivery.DriveDisk
	}
	return delivery.DriveCDROM
}
