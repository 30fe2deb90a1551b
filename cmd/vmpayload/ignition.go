package main

// The Ignition parts of the command line (issue 34): run's --ignition,
// --butane and --ignition-delivery, and inspect for an Ignition config file or an image
// holding one. Kept apart from the cloud-init flags so that the two evolve
// separately.

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/vmpayload/vmpayload/payload"
	"github.com/vmpayload/vmpayload/payload/image"
	"github.com/vmpayload/vmpayload/payload/job"
)

// ignitionFlags are run's Ignition flags.
type ignitionFlags struct {
	file, butane, delivery string
}

// defineIgnitionFlags defines run's Ignition flags on cmd.
func defineIgnitionFlags(cmd *cobra.Command, f *ignitionFlags) {
	fs := cmd.Flags()
	fs.StringVar(&f.file, "ignition", "", "the user's Ignition config `FILE` (JSON, spec 3.0.0-3.6.0), merged with the config made from the flags; implies --format ignition")
	fs.StringVar(&f.butane, "butane", "", "the user's Butane config `FILE` (YAML: variant fcos, flatcar, fiot or r4e), translated to Ignition and merged like --ignition; implies --format ignition")
	fs.StringVar(&f.delivery, "ignition-delivery", "", "how the Ignition config reaches the guest: `fwcfg|blockdev|configdrive|nocloud` (default: blockdev on s390x and ppc64 domains, else fwcfg); implies --format ignition")
	_ = cmd.MarkFlagFilename("ignition", "ign", "json")
	_ = cmd.MarkFlagFilename("butane", "bu", "yaml", "yml")
}

// applyIgnition puts the Ignition flags into j: the config as the job's
// ignition object (or the Butane config as its butane text) and the
// delivery, each making the job's format "ignition" unless --format names
// another (which validation refuses).
func (b *jobBuilder) applyIgnition(j *job.Job, f ignitionFlags, detach bool) error {
	if f.file == "" && f.butane == "" && f.delivery == "" {
		return nil
	}
	if detach {
		switch {
		case f.file != "":
			return errors.New("--detach removes the payload; --ignition has nothing to do with it")
		case f.butane != "":
			return errors.New("--detach removes the payload; --butane has nothing to do with it")
		}
		return errors.New("--detach removes the payload; --ignition-delivery has nothing to do with it")
	}
	if f.file != "" && f.butane != "" {
		return errors.New("use only one of --ignition and --butane: both are the user's own config")
	}
	j.Format = cmp.Or(j.Format, job.FormatIgnition)
	if f.file != "" {
		data, err := b.read("ignition", f.file, job.MaxJobBytes)
		if err != nil {
			return err
		}
		// numbers stay exact (json.Number); the job's validation then
		// reports what Ignition refuses in it, by Ignition's JSON path
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if err := dec.Decode(&j.Ignition); err != nil || j.Ignition == nil || dec.More() {
			if err == nil {
				err = errors.New("not one JSON object")
			}
			return fmt.Errorf("--ignition %s: want an Ignition config (a JSON object): %w", f.file, err)
		}
		b.set("ignition", "ignition", f.file)
	}
	if f.butane != "" {
		data, err := b.read("butane", f.butane, job.MaxJobBytes)
		if err != nil {
			return err
		}
		// the job's validation translates it and reports what Butane
		// refuses, with its YAML path and line
		j.Butane = string(data)
		b.set("butane", "butane", f.butane)
	}
	if f.delivery != "" {
		j.IgnitionDelivery = job.IgnitionDelivery(f.delivery)
		b.set("ignition_delivery", "ignition-delivery", strconv.Quote(f.delivery))
	}
	// without --format, the first of these flags made the format
	b.origin["format"] = cmp.Or(b.origin["format"], b.origin["ignition"], b.origin["butane"], b.origin["ignition_delivery"])
	return nil
}

// inspectIgnitionFile shows the summary of path when it is an Ignition
// config rather than an image; handled is false for anything else
// (inspect then reads it as an image).
func inspectIgnitionFile(path string, asJSON bool, stdout, stderr io.Writer) (handled bool, code int) {
	if _, err := image.Inspect(path); err == nil || !errors.Is(err, image.ErrUnknownFormat) {
		return false, 0
	}
	raw, err := readInput(path, image.MaxContentBytes) // an Ignition config is read up to the image content limit
	if err != nil || !payload.LooksLikeIgnition(raw) {
		return false, 0
	}
	s, err := payload.SummarizeIgnition(raw)
	if err != nil {
		fmt.Fprintf(stderr, "vmpayload inspect: %s: %v\n", path, err)
		return true, exitInvalid
	}
	if asJSON {
		printJSON(stdout, struct {
			Path     string                  `json:"path"`
			Ignition payload.IgnitionSummary `json:"ignition"`
		}{path, s})
		return true, exitOK
	}
	fmt.Fprintf(stdout, "config:  %s\nsize:    %d\n%s", path, len(raw), s.Text(""))
	return true, exitOK
}

// imageIgnition returns the summary of the Ignition config an image
// holds as its user-data (cidata) or openstack/latest/user_data
// (config-2), if it holds one.
func imageIgnition(info image.Info) (name string, s *payload.IgnitionSummary, err error) {
	for _, f := range info.Files {
		if f.Path != "user-data" && f.Path != "openstack/latest/user_data" {
			continue
		}
		raw, err := image.ReadFile(info.Path, f.Path)
		if err != nil {
			return f.Path, nil, err
		}
		if !payload.LooksLikeIgnition(raw) {
			return "", nil, nil
		}
		sum, err := payload.SummarizeIgnition(raw)
		if err != nil {
			return f.Path, nil, err
		}
		return f.Path, &sum, nil
	}
	return "", nil, nil
}

// ignitionBuildLine is build's line for an Ignition config written as a
// file (delivery fwcfg), which has no media or label; false for an image.
func ignitionBuildLine(res payload.Result) (string, bool) {
	if !res.IsFile() {
		return "", false
	}
	return fmt.Sprintf("%s: ignition config (fw_cfg) spec=%s size=%d sha256=%s", res.Path, res.IgnitionSpec, res.Size, res.SHA256), true
}
