//go:build gendocs

package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/vmpayload/vmpayload/cmd/internal/cli"
)

// "vmpayload gendocs DIR" (hidden, and only in a binary built with -tags
// gendocs: cobra/doc's markdown renderer costs the shipped binary 0.6 ms at
// every start) writes the manual pages and the shell completions of both
// binaries, from their cobra command trees, for the packages
// (packaging/build.sh: go run -tags gendocs ./cmd/vmpayload gendocs DIR):
//
//	DIR/man1/vmpayload.1, vmpayload-<command>.1 ...
//	DIR/man8/vmpayloadd.8
//	DIR/bash/vmpayload, DIR/bash/vmpayloadd
//	DIR/zsh/_vmpayload, DIR/zsh/_vmpayloadd
//	DIR/fish/vmpayload.fish, DIR/fish/vmpayloadd.fish
//
// The pages' date comes from SOURCE_DATE_EPOCH when it is set (cobra/doc
// reads it), so the same commit gives the same pages.

func init() {
	subcommands = append(subcommands, subcommand{"gendocs", newDocsCmd})
}

func newDocsCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "gendocs DIR",
		Short:  "write the manual pages and shell completions of vmpayload and vmpayloadd into DIR",
		Hidden: true,
		Args:   posArgs(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := writeDocs(args[0]); err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "vmpayload gendocs: %v\n", err)
				return cli.ExitCode(exitUsage)
			}
			return nil
		},
	}
}

// writeDocs writes the pages and completions into dir.
func writeDocs(dir string) error {
	source := "vmpayload " + version
	for _, t := range []struct {
		root    *cobra.Command
		section string
	}{
		{newRoot(""), "1"},
		{cli.NewDaemonCommand(nil), "8"},
	} {
		t.root.DisableAutoGenTag = true
		name := t.root.Name()
		for _, sub := range []string{"man" + t.section, "bash", "zsh", "fish"} {
			if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
				return err
			}
		}
		hdr := &doc.GenManHeader{Section: t.section, Source: source, Manual: "vmpayload manual"}
		if err := doc.GenManTree(t.root, hdr, filepath.Join(dir, "man"+t.section)); err != nil {
			return fmt.Errorf("man pages of %s: %w", name, err)
		}
		for file, gen := range map[string]func(string) error{
			filepath.Join(dir, "bash", name):         func(p string) error { return t.root.GenBashCompletionFileV2(p, true) },
			filepath.Join(dir, "zsh", "_"+name):      t.root.GenZshCompletionFile,
			filepath.Join(dir, "fish", name+".fish"): func(p string) error { return t.root.GenFishCompletionFile(p, true) },
		} {
			if err := gen(file); err != nil {
				return fmt.Errorf("completion of %s: %w", name, err)
			}
		}
	}
	return nil
}
