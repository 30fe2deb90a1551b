// Package register registers every payload kind: importing it makes
// package kinds know them all. Adding a kind is one line here.
package register

import (
	_ "github.com/vmpayload/vmpayload/payload/kinds/cloudbase" // guest_os "windows" of nocloud, configdrive
	_ "github.com/vmpayload/vmpayload/payload/kinds/cloudinit" // nocloud, configdrive
	_ "github.com/vmpayload/vmpayload/payload/kinds/credentials"
	_ "github.com/vmpayload/vmpayload/payload/kinds/ignition"
	_ "github.com/vmpayload/vmpayload/payload/kinds/sysprep"
)
