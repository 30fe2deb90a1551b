package main

import (
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vmpayload/vmpayload/payload"
	"github.com/vmpayload/vmpayload/payload/job"
)

// valuesResult is what `vmpayload build --json` prints for a payload of
// named values (format "credentials"): the names (never the values), the
// files written (fw_cfg) and the XML to add to the domain.
type valuesResult struct {
	Format      string   `json:"format"`
	Delivery    string   `json:"delivery"`
	Credentials []string `json:"credentials"`
	Files       []string `json:"files,omitempty"`
	XML         string   `json:"xml"`
}

// buildValues is build for a payload of named values: with the fw_cfg
// delivery, one file per value in the directory o.out (created, mode 0711)
// named after the value, mode 0600; with SMBIOS, no file. It prints the
// XML fragment to add to the domain (as `vmpayload recipe` does), or with
// --json a valuesResult.
func buildValues(o buildOptions, rd *payload.Rendered, stdout, stderr io.Writer) int {
	var paths map[string]string
	if len(rd.Parts()) > 0 {
		dir, err := filepath.Abs(o.out)
		if err == nil {
			err = os.MkdirAll(dir, 0o711)
		}
		if err != nil {
			fmt.Fprintf(stderr, "vmpayload build: the output directory %s: %v\n", o.out, err)
			return exitUsage
		}
		if paths, err = writeParts(rd, dir, func(key string) string { return key }); err != nil {
			fmt.Fprintf(stderr, "vmpayload build: %v\n", err)
			return exitUsage
		}
	}
	frag, err := valuesFragment(rd, paths)
	if err != nil {
		fmt.Fprintf(stderr, "vmpayload build: %v\n", err)
		return exitInvalid
	}
	if o.asJSON {
		res := valuesResult{Format: string(rd.Job.Format), Delivery: rd.Delivery(), Credentials: rd.Names(), XML: frag}
		for _, p := range rd.Parts() {
			res.Files = append(res.Files, paths[p.Key])
		}
		printJSON(stdout, res)
		return exitOK
	}
	fmt.Fprintln(stdout, frag)
	return exitOK
}

// credentialsFlags are run's flags of format "credentials"
// (docs/credentials.md), each one job field.
type credentialsFlags struct {
	delivery, keymap, motdFile, issueFile string
	creds, credFiles, credSecrets         []string
}

// defineCredentialsFlags defines the credentials flags on cmd, into f.
func defineCredentialsFlags(cmd *cobra.Command, f *credentialsFlags) {
	fs := cmd.Flags()
	fs.StringVar(&f.delivery, "credentials-delivery", "", "credentials: `smbios|fwcfg` (default: fwcfg when the job carries a secret, else smbios)")
	fs.StringVar(&f.keymap, "keymap", "", "credentials: console `KEYMAP`, e.g. de-latin1")
	fs.StringVar(&f.motdFile, "motd-file", "", "credentials: message of the day from `FILE`")
	fs.StringVar(&f.issueFile, "issue-file", "", "credentials: pre-login banner from `FILE`")
	fs.StringArrayVar(&f.creds, "credential", nil, "credentials: a text credential `NAME=VALUE` (repeatable)")
	fs.StringArrayVar(&f.credFiles, "credential-file", nil, "credentials: a credential `NAME=FILE`, the file's bytes (binary allowed; repeatable)")
	fs.StringArrayVar(&f.credSecrets, "credential-secret", nil, "credentials: a credential `NAME=SECRET` from the agent's secrets directory (repeatable)")
}

// applyCredentials puts the credentials flags into j. A flag's value is
// checked by validation, which names the job field; origin maps it back
// to the flag.
func (b *jobBuilder) applyCredentials(j *job.Job, f credentialsFlags) error {
	j.CredentialsDelivery, j.Keymap = job.CredentialsDelivery(f.delivery), f.keymap
	b.setGiven("", map[string]string{"credentials_delivery": "credentials-delivery", "keymap": "keymap"}, true)
	if err := b.readString("motd-file", f.motdFile, "motd", &j.Motd); err != nil {
		return err
	}
	if err := b.readString("issue-file", f.issueFile, "issue", &j.Issue); err != nil {
		return err
	}
	// NAME=VALUE pairs, in the order of the flags
	for _, c := range []struct {
		flag, want string // want: what goes after NAME= (the error's example)
		values     []string
	}{
		{"credential", "VALUE", f.creds}, {"credential-file", "FILE", f.credFiles}, {"credential-secret", "VALUE", f.credSecrets}} {
		for _, v := range c.values {
			n, val, ok := strings.Cut(v, "=")
			if !ok || n == "" {
				return fmt.Errorf("--%s %q: want NAME=%s", c.flag, v, c.want)
			}
			if c.flag == "credential-secret" {
				if j.CredentialSecrets == nil {
					j.CredentialSecrets = map[string]string{}
				}
				j.CredentialSecrets[n] = val
				b.set("credential_secrets."+n, c.flag, strconv.Quote(n))
				continue
			}
			cv, shown := job.CredentialValue{Text: val}, strconv.Quote(n)
			if c.flag == "credential-file" {
				data, err := b.read(c.flag, val, job.MaxJobBytes)
				if err != nil {
					return err
				}
				cv, shown = job.CredentialValue{Base64: base64.StdEncoding.EncodeToString(data), Binary: true}, val
			}
			if j.Credentials == nil {
				j.Credentials = job.Credentials{}
			}
			j.Credentials[n] = cv
			b.set("credentials."+n, c.flag, shown)
		}
	}
	return nil
}
