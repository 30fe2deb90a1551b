module github.com/vmpayload/vmpayload

go 1.26.0

require (
	github.com/beevik/etree v1.8.1
	github.com/coreos/butane v0.29.0
	github.com/coreos/go-semver v0.3.1
	github.com/coreos/go-systemd/v22 v22.7.0
	github.com/coreos/ign-converter v0.0.0-20230417193809-cee89ea7d8ff
	github.com/coreos/ignition v0.35.0
	github.com/coreos/ignition/v2 v2.26.0
	github.com/coreos/vcontext v0.0.0-20230201181013-d72178a18687
	github.com/diskfs/go-diskfs v1.9.4
	github.com/fsnotify/fsnotify v1.10.1
	github.com/go-crypt/crypt v0.14.15
	github.com/prometheus/client_model v0.6.3
	github.com/prometheus/common v0.73.1
	github.com/spf13/cobra v1.10.2
	github.com/spf13/pflag v1.0.10
	github.com/vincent-petithory/dataurl v1.0.0
	go.yaml.in/yaml/v3 v3.0.6
	golang.org/x/crypto v0.58.0
	golang.org/x/sys v0.49.0
	libvirt.org/go/libvirt v1.10000.0
	libvirt.org/go/libvirtxml v1.10000.0
)

require (
	github.com/ajeddeloh/go-json v0.0.0-20200220154158-5ae607161559 // indirect
	github.com/aws/aws-sdk-go-v2 v1.41.1 // indirect
	github.com/clarketm/json v1.17.1 // indirect
	github.com/coreos/go-json v0.0.0-20230131223807-18775e0fb4fb // indirect
	github.com/coreos/go-systemd v0.0.0-20181031085051-9002847aa142 // indirect
	github.com/cpuguy83/go-md2man/v2 v2.0.6 // indirect
	github.com/djherbis/times v1.6.0 // indirect
	github.com/elliotwutingfeng/asciiset v0.0.0-20260129054604-cfde2086bc57 // indirect
	github.com/go-crypt/x v0.4.16 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/kr/text v0.2.0 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/pandatix/go-abnf v0.5.3 // indirect
	github.com/rogpeppe/go-internal v1.16.0 // indirect
	github.com/russross/blackfriday/v2 v2.1.0 // indirect
	github.com/stretchr/testify v1.12.1 // indirect
	go4.org v0.0.0-20200104003542-c7e774b10ea0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)
