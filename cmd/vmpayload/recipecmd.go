package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vmpayload/vmpayload/agent/config"
	"github.com/vmpayload/vmpayload/internal/seal"
	"github.com/vmpayload/vmpayload/libvirtx/domxml"
	"github.com/vmpayload/vmpayload/payload"
	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/kinds"
	"github.com/vmpayload/vmpayload/payload/recipe"
)

// "vmpayload recipe": the agent's attach without the agent. It builds the
// image into the payload directory under the name the agent gives it and
// prints what makes the domain durable (docs/durability.md, "Without the
// agent").

// recipeOptions are the flags of recipe.
type recipeOptions struct {
	payloadDir, secretsDir, bus, mode, domainXML, name, driveFile string
}

func newRecipeCmd() *cobra.Command {
	d := config.Default()
	var o recipeOptions
	cmd := command("recipe [--domain-xml FILE | --name PREFIX [--drive-file FILE]] JOB.json|-",
		"build a job's image into the payload directory and print the domain XML (or recipe and drive) that the hook rebuilds it from",
		1, 1, cobra.FixedCompletions([]string{"json"}, cobra.ShellCompDirectiveFilterFileExt),
		func(args []string, stdout, stderr io.Writer) int { return runRecipe(o, args[0], stdout, stderr) })
	fs := cmd.Flags()
	fs.StringVar(&o.payloadDir, "payload-dir", d.PayloadDir, "`DIR` the image is written to (the hook's payload_dir)")
	fs.StringVar(&o.secretsDir, "secrets-dir", d.SecretsDir, "`DIR` where password_secret and user_data_secret names resolve (the hook's secrets_dir)")
	fs.StringVar(&o.bus, "bus", d.CDROMBus, "bus of the payload drive: auto, ide, sata or scsi")
	fs.StringVar(&o.mode, "image-mode", d.ImageModeOctal, "permission bits of the image file (octal)")
	fs.StringVar(&o.domainXML, "domain-xml", "", "domain definition `FILE` to add the drive and recipe to (\"-\": stdin); its <uuid> prefixes the image name")
	fs.StringVar(&o.name, "name", "", "image name `PREFIX` without --domain-xml (default: the job's domain)")
	fs.StringVar(&o.driveFile, "drive-file", "", "without --domain-xml: write the drive XML to this `FILE` instead of stdout")
	_ = cmd.MarkFlagDirname("payload-dir")
	_ = cmd.MarkFlagDirname("secrets-dir")
	_ = cmd.RegisterFlagCompletionFunc("bus", cobra.FixedCompletions([]string{"auto", "ide", "sata", "scsi"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// placeholderDomain stands in for the domain when no --domain-xml is given:
// a q35 machine with no drives, so that --bus auto picks SATA (ISO) or
// virtio (vfat) and the first target name; valuesFragment fills one in.
const placeholderDomain = `<domain type='kvm'><name>placeholder</name><os><type arch='x86_64' machine='q35'>hvm</type></os><devices/></domain>`

func runRecipe(o recipeOptions, jobFile string, stdout, stderr io.Writer) int {
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "vmpayload recipe: "+format+"\n", a...)
		return code
	}
	perm, err := parseMode("image-mode", o.mode)
	if err != nil {
		return fail(exitUsage, "%v", err)
	}
	bus, err := domxml.ParseBus(o.bus)
	if err != nil {
		return fail(exitUsage, "--bus: %v", err)
	}
	if !filepath.IsAbs(o.payloadDir) {
		return fail(exitUsage, "--payload-dir %q is not an absolute path", o.payloadDir)
	}
	if jobFile == "-" && o.domainXML == "-" {
		return fail(exitUsage, "the job and --domain-xml cannot both be stdin")
	}

	data, code := readJob(jobFile, stderr)
	if code != 0 {
		return code
	}
	j, checked, rep := payload.Check(data, payload.CheckOptions{Secrets: true, SecretsDir: o.secretsDir, Build: true})
	if !rep.OK() {
		return printErr(stderr, rep.Err())
	}
	if j.PrebuiltImage != "" {
		return fail(exitInvalid, "%v", recipe.ErrPrebuilt)
	}

	prefix := o.name
	// the domain XML given is read once: its UUID, platform and edits
	var doc *domxml.Document
	if o.domainXML != "" {
		b, err := readInput(o.domainXML, recipe.MaxDomainXML)
		if err != nil {
			return fail(exitUsage, "reading the domain XML: %v", err)
		}
		if doc, err = domxml.Read(string(b)); err != nil {
			return fail(exitInvalid, "reading the domain XML %s: %v", o.domainXML, err)
		}
		uuid := doc.UUID()
		if uuid == "" {
			return fail(exitInvalid, "the domain XML %s has no <uuid>: add one (e.g. <uuid>$(uuidgen)</uuid>) so that the image name and the domain agree", o.domainXML)
		}
		// libvirt's spelling, which the hook compares the image name with
		prefix = domxml.CanonicalUUID(uuid)
	}
	prefix = cmp.Or(prefix, j.Domain)
	if prefix == "" || prefix != filepath.Base(prefix) || prefix[0] == '.' {
		return fail(exitUsage, "no usable image name prefix %q: give --domain-xml, --name or a job with a domain", prefix)
	}

	if o.domainXML != "" && kinds.Chooses(j.Format) == kinds.ChooseDelivery {
		// the delivery the domain's architecture reads, as the agent
		// chooses it: blockdev on s390x and ppc64, where QEMU has no fw_cfg
		if plat := doc.Platform(); plat.NoFwCfg() {
			switch j.IgnitionDelivery {
			case "":
				jb := *j
				jb.IgnitionDelivery = job.DeliveryBlockdev
				if checked, rep = payload.CheckJob(&jb, payload.CheckOptions{Secrets: true, SecretsDir: o.secretsDir, Build: true}); !rep.OK() {
					return printErr(stderr, rep.Err())
				}
			case job.DeliveryFwCfg:
				return fail(exitInvalid, "ignition_delivery \"fwcfg\": the domain's architecture is %s, where QEMU has no fw_cfg device; use \"blockdev\" (the default there)", plat.Arch)
			}
		}
	}
	rendered, err := payload.Render(checked, payload.Options{})
	if err != nil {
		printErr(stderr, err)
		return exitInvalid
	}
	if err := os.MkdirAll(o.payloadDir, 0o711); err != nil {
		return fail(exitUsage, "creating the payload directory: %v", err)
	}
	if rendered.Shape() != payload.ShapeImage {
		// named values (systemd credentials): a file per value, or none
		return recipeValues(o, rendered, prefix, doc, fail, stdout, stderr)
	}
	path := filepath.Join(o.payloadDir, rendered.ImageName(prefix))
	res, err := rendered.Write(context.Background(), path, payload.Options{Mode: perm, GID: -1})
	if err != nil {
		return fail(exitUsage, "%v", err)
	}
	rc, err := recipe.New(rendered, res)
	if err != nil {
		return fail(exitInvalid, "%v", err)
	}
	el, code, err := sealedElement(rc, o.secretsDir)
	if err != nil {
		return fail(code, "%v", err)
	}
	if !domxml.IsUUID(prefix) {
		fmt.Fprintf(stderr, "vmpayload recipe: note: the hook rebuilds only images whose name starts with their domain's UUID; give --name $(virsh domuuid DOMAIN) (or --domain-xml) for a domain whose image it should rebuild\n")
	}

	if rendered.Delivery() == kinds.DeliveryFwCfg {
		// An Ignition config delivered by fw_cfg: the entries naming it, as
		// the agent writes them, instead of a drive.
		if doc != nil {
			_, err := doc.SetFwCfgFile(path, domxml.IgnitionFwCfgNames...)
			if err == nil {
				err = doc.SetMetadata(recipe.Namespace, el)
			}
			return printDoc(doc, err, "the fw_cfg entries and the recipe", stdout, stderr)
		}
		sys, err := domxml.FwCfgSysinfoXML(path, domxml.IgnitionFwCfgNames...)
		if err != nil {
			return fail(exitInvalid, "%v", err)
		}
		return printFragment(o.driveFile, el, sys, "sysinfo", stdout, stderr)
	}
	// vfat payloads are read-only disks and sysprep floppies floppy
	// drives, as the agent attaches them.
	var opts []domxml.Option
	switch rendered.Delivery() {
	case kinds.DeliveryBlockdev:
		// ignition_delivery "blockdev": the config file as a read-only
		// raw virtio disk with serial "ignition", as the agent attaches it
		opts, bus = append(opts, domxml.AsDisk(), domxml.WithSerial(domxml.IgnitionSerial)), domxml.BusVirtio
	case kinds.DeliveryFloppy:
		opts = append(opts, domxml.AsFloppy())
	default:
		if rendered.Job.Media == job.MediaVFAT {
			opts = append(opts, domxml.AsDisk())
			if bus == domxml.BusIDE || bus == domxml.BusSATA {
				bus = domxml.BusAuto
			}
		}
	}
	if doc != nil {
		// one edit session: the drive, then the recipe
		if _, _, err := doc.SetPayloadDrive(path, bus, opts...); err != nil {
			return fail(exitInvalid, "adding the payload drive: %v", err)
		}
		if err := doc.SetMetadata(recipe.Namespace, el); err != nil {
			return fail(exitInvalid, "adding the recipe: %v", err)
		}
		return printDoc(doc, nil, "the payload drive", stdout, stderr)
	}
	ph, _ := domxml.Read(placeholderDomain) // a constant that parses
	dev, err := ph.ChooseDevice(bus, opts...)
	if err != nil {
		return fail(exitInvalid, "choosing the payload drive: %v", err)
	}
	drive, err := domxml.PayloadDeviceXML(path, dev, opts...)
	if err != nil {
		return fail(exitInvalid, "%v", err)
	}
	return printFragment(o.driveFile, el, drive, "drive", stdout, stderr)
}

// printDoc prints the domain XML doc holds after the edits that gave err,
// or fails with err, naming what the edits added.
func printDoc(doc *domxml.Document, err error, what string, stdout, stderr io.Writer) int {
	x := ""
	if err == nil {
		x, err = doc.XML()
	}
	if err != nil {
		fmt.Fprintf(stderr, "vmpayload recipe: adding %s: %v\n", what, err)
		return exitInvalid
	}
	fmt.Fprintln(stdout, x)
	return exitOK
}

// printFragment prints the recipe element el in the form virsh metadata
// --set takes (libvirt adds the prefix and namespace it is given as --key
// and URI), then frag, the XML to add to the domain, into file when one is
// named, else to stdout; what names frag in an error.
func printFragment(file, el, frag, what string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stdout, recipe.MetadataContent(el))
	if file == "" {
		fmt.Fprintln(stdout, frag)
		return exitOK
	}
	if err := os.WriteFile(file, []byte(frag+"\n"), 0o644); err != nil {
		fmt.Fprintf(stderr, "vmpayload recipe: writing the %s XML: %v\n", what, err)
		return exitUsage
	}
	return exitOK
}

// recipeValues is runRecipe for a payload of named values (systemd
// credentials): it writes one file per value into the payload directory
// (fw_cfg; none for SMBIOS) and prints the domain XML with the values and
// the recipe (--domain-xml), or the recipe and the fragment to add
// (<sysinfo type='fwcfg'> entries, or <sysinfo type='smbios'> OEM strings
// and <os><smbios mode='sysinfo'/>). fail prints runRecipe's errors.
func recipeValues(o recipeOptions, rd *payload.Rendered, prefix string, doc *domxml.Document, fail func(code int, format string, a ...any) int,
	stdout, stderr io.Writer) int {
	paths, err := writeParts(rd, o.payloadDir, func(key string) string { return rd.PartName(prefix, key) })
	if err != nil {
		return fail(exitUsage, "%v", err)
	}
	rc, err := recipe.NewValues(rd, paths)
	if err != nil {
		return fail(exitInvalid, "%v", err)
	}
	el, code, err := sealedElement(rc, o.secretsDir)
	if err != nil {
		return fail(code, "%v", err)
	}
	if len(paths) > 0 && !domxml.IsUUID(prefix) {
		fmt.Fprintf(stderr, "vmpayload recipe: note: the hook rebuilds only files whose name starts with their domain's UUID; give --name $(virsh domuuid DOMAIN) (or --domain-xml) for a domain whose files it should rebuild\n")
	}
	if doc != nil {
		err := setValues(doc, rd, paths)
		if err == nil {
			err = doc.SetMetadata(recipe.Namespace, el)
		}
		return printDoc(doc, err, "the credentials and the recipe", stdout, stderr)
	}
	frag, err := valuesFragment(rd, paths)
	if err != nil {
		return fail(exitInvalid, "%v", err)
	}
	return printFragment(o.driveFile, el, frag, "sysinfo", stdout, stderr)
}

// writeParts writes the part files of rd (Rendered.Parts) into dir, each
// under the name name gives its key, and returns each one's path by its
// key; nil for a payload without files.
func writeParts(rd *payload.Rendered, dir string, name func(key string) string) (map[string]string, error) {
	parts := rd.Parts()
	if len(parts) == 0 {
		return nil, nil
	}
	paths := map[string]string{}
	for _, p := range parts {
		path := filepath.Join(dir, name(p.Key))
		if err := payload.WritePart(context.Background(), path, p.Data, payload.Options{GID: -1}); err != nil {
			return nil, err
		}
		paths[p.Key] = path
	}
	return paths, nil
}

// setValues puts rd's values into doc as the agent's delivery does: one
// fw_cfg entry per part file, or SMBIOS OEM strings.
func setValues(doc *domxml.Document, rd *payload.Rendered, paths map[string]string) error {
	if len(paths) == 0 {
		return doc.SetSMBIOSCredentials(rd.Inline(), nil)
	}
	var files []domxml.CredentialFile
	for _, p := range rd.Parts() {
		files = append(files, domxml.CredentialFile{Name: p.Key, File: paths[p.Key]})
	}
	return doc.SetFwCfgCredentials(files, nil)
}

// valuesFragment is the XML to add to a domain for rd's values: the
// <sysinfo> element(s), and for SMBIOS the <smbios mode='sysinfo'/> that
// goes into <os>.
func valuesFragment(rd *payload.Rendered, paths map[string]string) (string, error) {
	doc, _ := domxml.Read(placeholderDomain) // a constant that parses
	if err := setValues(doc, rd, paths); err != nil {
		return "", err
	}
	x, err := doc.XML()
	if err != nil {
		return "", err
	}
	frag := strings.Join(regexp.MustCompile(`(?s)<sysinfo\b.*?</sysinfo>`).FindAllString(x, -1), "\n")
	if len(paths) == 0 {
		frag += "\n<!-- in <os>: -->\n<smbios mode='sysinfo'/>"
	}
	return frag, nil
}

// sealedElement is rc's recipe element, its job sealed with the secrets
// directory's recipe key (made on first need), which the hook reads there
// (docs/security.md). The exit code says whose the error is: the key's
// (exitUsage) or the recipe's (exitInvalid).
func sealedElement(rc *recipe.Recipe, secretsDir string) (string, int, error) {
	keys, err := seal.LoadOrCreate(recipe.KeyFile(secretsDir))
	if err != nil {
		return "", exitUsage, err
	}
	el, err := rc.Element(keys)
	if err != nil {
		return "", exitInvalid, err
	}
	return el, 0, nil
}
