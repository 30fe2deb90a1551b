package cloudinit

import (
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/vmpayload/vmpayload/payload/job"
)

// NetworkV2 is cloud-init's network-config version 2 (netplan-like), the
// NoCloud network-config document. It starts at "version:" with no
// "network:" wrapper, which older cloud-init releases require.
type NetworkV2 struct {
	Version   int                 `yaml:"version"`
	Ethernets map[string]Ethernet `yaml:"ethernets"`
}

// Ethernet is one physical interface in network-config v2.
type Ethernet struct {
	Match       Match        `yaml:"match"`
	SetName     string       `yaml:"set-name"`
	MTU         int          `yaml:"mtu,omitempty"`
	DHCP4       bool         `yaml:"dhcp4"`
	DHCP6       bool         `yaml:"dhcp6"`
	AcceptRA    *bool        `yaml:"accept-ra,omitempty"`
	Addresses   []string     `yaml:"addresses,omitempty"`
	Routes      []RouteV2    `yaml:"routes,omitempty"`
	Nameservers *Nameservers `yaml:"nameservers,omitempty"`
}

// Match selects the guest interface by MAC address.
type Match struct {
	MACAddress string `yaml:"macaddress"`
}

// RouteV2 is a route; default routes use 0.0.0.0/0 or ::/0 because
// cloud-init 22.4 rejects "to: default".
type RouteV2 struct {
	To  string `yaml:"to"`
	Via string `yaml:"via"`
}

// Nameservers is a v2 DNS block.
type Nameservers struct {
	Addresses []string `yaml:"addresses,omitempty"`
	Search    []string `yaml:"search,omitempty"`
}

// nicName is the guest interface name used for nics[i].
func nicName(n job.NIC, i int) string {
	if n.Name != "" {
		return n.Name
	}
	return fmt.Sprintf("eth%d", i)
}

func buildNetworkV2(j *job.Job) *NetworkV2 {
	if len(j.NICs) == 0 {
		return nil
	}
	nc := &NetworkV2{Version: 2, Ethernets: map[string]Ethernet{}}
	for i, n := range j.NICs {
		name := nicName(n, i)
		e := Ethernet{Match: Match{MACAddress: strings.ToLower(n.MAC)}, SetName: name, MTU: n.MTU}
		if c := n.IPv4; c != nil {
			switch c.Method {
			case job.MethodDHCP:
				e.DHCP4 = true
			case job.MethodStatic:
				e.Addresses = append(e.Addresses, c.Address)
				if c.Gateway != "" {
					e.Routes = append(e.Routes, RouteV2{To: "0.0.0.0/0", Via: c.Gateway})
				}
			}
		}
		if c := n.IPv6; c != nil {
			switch c.Method {
			case job.MethodDHCP:
				e.DHCP6 = true
			case job.MethodSLAAC:
				e.AcceptRA = ptr(true)
			case job.MethodStatic:
				e.Addresses = append(e.Addresses, c.Address)
				e.AcceptRA = ptr(false)
				if c.Gateway != "" {
					e.Routes = append(e.Routes, RouteV2{To: "::/0", Via: c.Gateway})
				}
			case job.MethodNone:
				e.AcceptRA = ptr(false)
			}
		}
		if j.DNS != nil && (len(j.DNS.Nameservers) > 0 || len(j.DNS.Search) > 0) {
			e.Nameservers = &Nameservers{Addresses: j.DNS.Nameservers, Search: j.DNS.Search}
		}
		nc.Ethernets[name] = e
	}
	return nc
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
	ID        string    `json:"id"`
	Type      string    `json:"type"`
	Link      string    `json:"link"`
	IPAddress string    `json:"ip_address,omitempty"`
	Netmask   string    `json:"netmask,omitempty"`
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
		if n.MTU != 0 {
			l.MTU = ptr(n.MTU)
		}
		nd.Links = append(nd.Links, l)
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
				if c.Gateway != "" {
					if fam == "ipv4" {
						nw.Routes = []Route{{Network: "0.0.0.0", Netmask: "0.0.0.0", Gateway: c.Gateway}}
					} else {
						nw.Routes = []Route{{Network: "::", Netmask: "::", Gateway: c.Gateway}}
					}
				}
				nw.Services = dns
				nw.DNSSearch = search
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
	bits := 32
	if p.Addr().Is6() {
		bits = 128
	}
	m := net.CIDRMask(p.Bits(), bits)
	return net.IP(m).String()
}
