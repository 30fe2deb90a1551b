package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/vmpayload/vmpayload/agent/config"
	"github.com/vmpayload/vmpayload/libvirtx/domxml"
	"github.com/vmpayload/vmpayload/payload"
	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/recipe"
)

// "vmpayload recipe": the agent's attach without the agent. It builds the
// image into the payload directory under the name the agent gives it and
// prints what makes the domain durable (docs/durability.md, "Without the
// agent").

func init() {
	register(command{name: "recipe",
		usage:   "[--payload-dir DIR] [--secrets-dir DIR] [--bus auto|ide|sata|scsi] [--image-mode 0640] [--domain-xml FILE | --name PREFIX [--drive-file FILE]] JOB.json|-",
		summary: "build a job's image into the payload directory and print the domain XML (or recipe and drive) that the hook rebuilds it from",
		run:     runRecipe})
}

// placeholderDomain stands in for the domain when no --domain-xml is given:
// a q35 machine with no drives, so that --bus auto picks SATA (ISO) or
// virtio (vfat) and the first target name.
const placeholderDomain = `<domain type='kvm'><name>placeholder</name><os><type arch='x86_64' machine='q35'>hvm</type></os><devices/></domain>`

func runRecipe(c command, args []string, stdout, stderr io.Writer) int {
	d := config.Default()
	fs := newFlags(c, stderr)
	payloadDir := fs.String("payload-dir", d.PayloadDir, "directory the image is written to (the hook's payload_dir)")
	secretsDir := fs.String("secrets-dir", d.SecretsDir, "directory where password_secret and user_data_secret names resolve (the hook's secrets_dir)")
	busFlag := fs.String("bus", d.CDROMBus, "bus of the payload drive: auto, ide, sata or scsi")
	mode := fs.String("image-mode", d.ImageModeOctal, "permission bits of the image file (octal)")
	domainXML := fs.String("domain-xml", "", "domain definition to add the drive and recipe to (\"-\": stdin); its <uuid> prefixes the image name")
	name := fs.String("name", "", "image name prefix without --domain-xml (default: the job's domain)")
	driveFile := fs.String("drive-file", "", "without --domain-xml: write the drive XML to this file instead of stdout")
	pos, code, ok := parseOrUsage(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		fs.Usage()
		return exitUsage
	}
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "vmpayload recipe: "+format+"\n", a...)
		return code
	}
	perm, err := strconv.ParseUint(*mode, 8, 32)
	if err != nil || perm > 0o777 {
		return fail(exitUsage, "--image-mode %q is not an octal permission such as 0640", *mode)
	}
	bus, err := domxml.ParseBus(*busFlag)
	if err != nil {
		return fail(exitUsage, "--bus: %v", err)
	}
	if !filepath.IsAbs(*payloadDir) {
		return fail(exitUsage, "--payload-dir %q is not an absolute path", *payloadDir)
	}
	if pos[0] == "-" && *domainXML == "-" {
		return fail(exitUsage, "the job and --domain-xml cannot both be stdin")
	}

	data, code := readJob(pos[0], stderr)
	if code != 0 {
		return code
	}
	j, checked, rep := payload.Check(data, payload.CheckOptions{Secrets: true, SecretsDir: *secretsDir, Build: true})
	if !rep.OK() {
		printErr(stderr, rep.Err())
		return exitInvalid
	}
	if j.PrebuiltImage != "" {
		return fail(exitInvalid, "%v", recipe.ErrPrebuilt)
	}

	dom := placeholderDomain
	prefix := *name
	if *domainXML != "" {
		b, err := readInput(*domainXML, recipe.MaxDomainXML)
		if err != nil {
			return fail(exitUsage, "reading the domain XML: %v", err)
		}
		dom = string(b)
		uuid, err := domxml.DomainUUID(dom)
		if err != nil {
			return fail(exitInvalid, "reading the domain XML %s: %v", *domainXML, err)
		}
		if uuid == "" {
			return fail(exitInvalid, "the domain XML %s has no <uuid>: add one (e.g. <uuid>$(uuidgen)</uuid>) so that the image name and the domain agree", *domainXML)
		}
		prefix = uuid
	}
	if prefix == "" {
		prefix = j.Domain
	}
	if prefix == "" || prefix != filepath.Base(prefix) || prefix[0] == '.' {
		return fail(exitUsage, "no usable image name prefix %q: give --domain-xml, --name or a job with a domain", prefix)
	}

	rendered, err := payload.Render(checked, payload.Options{})
	if err != nil {
		printErr(stderr, err)
		return exitInvalid
	}
	if err := os.MkdirAll(*payloadDir, 0o711); err != nil {
		return fail(exitUsage, "creating the payload directory: %v", err)
	}
	path := filepath.Join(*payloadDir, rendered.ImageName(prefix))
	res, err := rendered.Write(context.Background(), path, payload.Options{Mode: os.FileMode(perm), GID: -1})
	if err != nil {
		return fail(exitUsage, "%v", err)
	}
	rc, err := recipe.New(rendered, res)
	if err != nil {
		return fail(exitInvalid, "%v", err)
	}
	el, err := rc.Element()
	if err != nil {
		return fail(exitInvalid, "%v", err)
	}

	// vfat payloads are read-only disks, as the agent attaches them.
	var opts []domxml.Option
	if rendered.Job.Media == job.MediaVFAT {
		opts = append(opts, domxml.AsDisk())
		if bus == domxml.BusIDE || bus == domxml.BusSATA {
			bus = domxml.BusAuto
		}
	}
	if *domainXML != "" {
		x, _, _, err := domxml.SetPayloadDrive(dom, path, bus, opts...)
		if err != nil {
			return fail(exitInvalid, "adding the payload drive: %v", err)
		}
		if x, err = domxml.SetMetadata(x, recipe.Namespace, el); err != nil {
			return fail(exitInvalid, "adding the recipe: %v", err)
		}
		fmt.Fprintln(stdout, x)
		return exitOK
	}
	dev, err := domxml.ChooseDevice(dom, bus, opts...)
	if err != nil {
		return fail(exitInvalid, "choosing the payload drive: %v", err)
	}
	drive, err := domxml.PayloadDeviceXML(path, dev, opts...)
	if err != nil {
		return fail(exitInvalid, "%v", err)
	}
	fmt.Fprintln(stdout, el)
	if *driveFile != "" {
		if err := os.WriteFile(*driveFile, []byte(drive+"\n"), 0o644); err != nil {
			return fail(exitUsage, "writing the drive XML: %v", err)
		}
		return exitOK
	}
	fmt.Fprintln(stdout, drive)
	return exitOK
}
