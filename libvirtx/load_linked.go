//go:build !libvirt_dlopen

package libvirtx

// libvirtLoadable reports why libvirt cannot be loaded. Without the
// libvirt_dlopen build tag libvirt is linked into the binary, which would
// not have started without it, so it is always loadable.
func libvirtLoadable() error { return nil }
