package cloudinit

import (
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/vmpayload/vmpayload/payload/job"
)

// NetworkV1 is cloud-init's network-config version 1, the NoCloud
// network-config document. Version 1 is cloud-init's native format: 22.4
// renders it correctly for ifupdown (ENI), while its v2 translation there
// turns an IPv6 default route into "::/64" and drops SLAAC. The document
// starts at "version:" with no "network:" wrapper, which older releases need.
type NetworkV1 struct {
	Version int        `yaml:"version"`
	Config  []ConfigV1 `yaml:"config"`
}

// ConfigV1 is one entry of a v1 config list: a physical interface or the
// global nameserver settings.
type ConfigV1 struct {
	Type       string     `yaml:"type"`
	Name       string     `yaml:"name,omitempty"`
	MACAddress string     `yaml:"mac_address,omitempty"`
	MTU        int        `yaml:"mtu,omitempty"`
	AcceptRA   *bool      `yaml:"accept-ra,omitempty"`
	Subnets    []SubnetV1 `yaml:"subnets,omitempty"`
	Address    []string   `yaml:"address,omitempty"`
	Search     []string   `yaml:"search,omitempty"`
}

// SubnetV1 is an address configuration of a v1 physical interface.
type SubnetV1 struct {
	Type    string `yaml:"type"`
	Address string `yaml:"address,omitempty"`
	Gateway string `yaml:"gateway,omitempty"`
}

// nicName is the guest interface name used for nics[i].
func nicName(n job.NIC, i int) string {
	if n.Name != "" {
		return n.Name
	}
	return fmt.Sprintf("eth%d", i)
}

func buildNetworkV1(j *job.Job) *NetworkV1 {
	if len(j.NICs) == 0 {
		return nil
	}
	nc := &NetworkV1{Version: 1}
	for i, n := range j.NICs {
		e := ConfigV1{Type: "physical", Name: nicName(n, i), MACAddress: strings.ToLower(n.MAC), MTU: n.MTU}
		if c := n.IPv4; c != nil {
			switch c.Method {
			case job.MethodDHCP:
				e.Subnets = append(e.Subnets, SubnetV1{Type: "dhcp4"})
			case job.MethodStatic:
				e.Subnets = append(e.Subnets, SubnetV1{Type: "static", Address: c.Address, Gateway: c.Gateway})
			}
		}
		if c := n.IPv6; c != nil {
			switch c.Method {
			case job.MethodDHCP:
				e.Subnets = append(e.Subnets, SubnetV1{Type: "dhcp6"})
			case job.MethodSLAAC:
				e.Subnets = append(e.Subnets, SubnetV1{Type: "ipv6_slaac"})
			case job.MethodStatic:
				e.Subnets = append(e.Subnets, SubnetV1{Type: "static6", Address: c.Address, Gateway: c.Gateway})
				e.AcceptRA = ptr(false)
			case job.MethodNone:
				e.AcceptRA = ptr(false)
			}
		}
		if j.IsWindows() {
			e.Subnets, e.AcceptRA = windowsSubnetsV1(e.Subnets), nil
		} else if len(e.Subnets) == 0 {
			// link up without addresses
			e.Subnets = append(e.Subnets, SubnetV1{Type: "manual"})
		}
		nc.Config = append(nc.Config, e)
	}
	if j.DNS != nil && (len(j.DNS.Nameservers) > 0 || len(j.DNS.Search) > 0) {
		nc.Config = append(nc.Config, ConfigV1{Type: "nameserver", Address: j.DNS.Nameservers, Search: j.DNS.Search})
	}
	return nc
}

// windowsSubnetsV1 rewrites a NIC's v1 subnets for cloudbase-init's
// NoCloud reader, which skips only subnets of type "dhcp" and "dhcp6" and
// takes every other one as a static address (one without, such as
// cloud-init's "dhcp4", "ipv6_slaac" or "manual", stops its network
// plugin): DHCP becomes "dhcp"/"dhcp6", SLAAC (Windows' default) is left
// out, and so is the "manual" placeholder.
func windowsSubnetsV1(in []SubnetV1) []SubnetV1 {
	var out []SubnetV1
	for _, s := range in {
		switch s.Type {
		case "dhcp4":
			s.Type = "dhcp"
		case "ipv6_slaac", "manual":
			continue
		}
		out = append(out, s)
	}
	return out
}

// NetworkData is OpenStack's network_data.json, in the shape Nova writes and
// cloud-init's ConfigDrive reader converts.
type NetworkData struct {
	Links    []Link    `json:"links"`
	Networks []Network `json:"networks"`
	Services []Service `json:"services"`
}

// Link is a network_data.json link (a guest NIC).
type Link struct {
	ID                 string `json:"id"`
	Type               string `json:"type"`
	EthernetMACAddress string `json:"ethernet_mac_address"`
	MTU                *int   `json:"mtu"`
	// Name is not in OpenStack's spec, but cloud-init uses it for the
	// interface name when present.
	Name  string `json:"name"`
	VifID string `json:"vif_id"`
}

// Network is a network_data.json network (an address configuration on a link).
type Network struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Link      string `json:"link"`
	IPAddress string `json:"ip_address,omitempty"`
	Netmask   string `json:"netmask,omitempty"`
	// Gateway is read by cloud-init's converter (it is in its list of
	// subnet keys). The default route is given this way rather than as a
	// Nova-style routes entry: cloud-init 22.4 renders routes for ifupdown
	// as "post-up route add", which needs net-tools in the guest, and a
	// default route given both ways makes netplan refuse the config.
	Gateway   string    `json:"gateway,omitempty"`
	Routes    []Route   `json:"routes,omitempty"`
	NetworkID string    `json:"network_id"`
	Services  []Service `json:"services,omitempty"`
	// DNSSearch is a cloud-init extension to the format: OpenStack has no
	// field for search domains.
	DNSSearch []string `json:"dns_search,omitempty"`
}

// Route is a network_data.json route.
type Route struct {
	Network string `json:"network"`
	Netmask string `json:"netmask"`
	Gateway string `json:"gateway"`
}

// Service is a network_data.json service (only "dns" is used).
type Service struct {
	Type    string `json:"type"`
	Address string `json:"address"`
}

func buildNetworkData(j *job.Job) *NetworkData {
	if len(j.NICs) == 0 {
		return nil
	}
	nd := &NetworkData{Links: []Link{}, Networks: []Network{}, Services: []Service{}}
	var dns []Service
	var search []string
	if j.DNS != nil {
		for _, ns := range j.DNS.Nameservers {
			dns = append(dns, Service{Type: "dns", Address: ns})
		}
		search = j.DNS.Search
	}
	nd.Services = append(nd.Services, dns...)
	for i, n := range j.NICs {
		name := nicName(n, i)
		l := Link{ID: "vmpayload-" + name, Type: "phy", EthernetMACAddress: strings.ToLower(n.MAC), Name: name, VifID: name}
		if j.IsWindows() {
			// cloudbase-init renames the adapter to the link's id
			l.ID = name
		}
		if n.MTU != 0 {
			l.MTU = ptr(n.MTU)
		}
		nd.Links = append(nd.Links, l)
		searchSet := false
		add := func(fam string, c *job.IPConfig) {
			if c == nil || c.Method == job.MethodNone || c.Method == "" {
				return
			}
			nw := Network{ID: fmt.Sprintf("network%d-%s", i, fam), Link: l.ID, NetworkID: fmt.Sprintf("%s-%s", name, fam)}
			switch {
			case c.Method == job.MethodDHCP && fam == "ipv4":
				nw.Type = "ipv4_dhcp"
			case c.Method == job.MethodDHCP:
				nw.Type = "ipv6_dhcpv6-stateful"
			case c.Method == job.MethodSLAAC:
				nw.Type = "ipv6_slaac"
			default:
				pfx, err := netip.ParsePrefix(c.Address)
				if err != nil { // Validate rejects this; never panic on input
					return
				}
				nw.Type = fam
				nw.IPAddress = pfx.Addr().String()
				nw.Netmask = netmask(pfx)
				nw.Gateway = c.Gateway
				if j.IsWindows() && c.Gateway != "" {
					// cloudbase-init takes the default gateway only from a
					// route of prefix 0, never from a network's gateway
					nw.Gateway = ""
					nw.Routes = []Route{defaultRoute(fam, c.Gateway)}
				}
				nw.Services = dns
				if !searchSet { // once per link: cloud-init would list it twice
					nw.DNSSearch, searchSet = search, true
				}
			}
			nd.Networks = append(nd.Networks, nw)
		}
		add("ipv4", n.IPv4)
		add("ipv6", n.IPv6)
	}
	return nd
}

// netmask renders a prefix length as a dotted (IPv4) or colon (IPv6) mask.
func netmask(p netip.Prefix) string {
	return net.IP(net.CIDRMask(p.Bits(), p.Addr().BitLen())).String()
}

// defaultRoute is the network_data.json route of prefix 0 (Nova's form of
// a subnet's gateway) of family fam ("ipv4" or "ipv6") through gw.
func defaultRoute(fam, gw string) Route {
	if fam == "ipv6" {
		return Route{Network: "::", Netmask: "::", Gateway: gw}
	}
	return Route{Network: "0.0.0.0", Netmask: "0.0.0.0", Gateway: gw}
}
