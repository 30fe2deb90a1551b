// Package image builds and reads the small read-only filesystem images that carry
// cloud-init documents to a guest: ISO9660 with Rock Ridge and Joliet or
// vfat (FAT12), labelled "cidata" (NoCloud) or "config-2" (OpenStack config drive).
//
// Images are built in memory, checked against the spec, written to a
// temporary file next to the destination, fsynced, read back and compared
// with the built image, and only then renamed into place (Write, verify.go).
// On any error nothing is left behind.
//
// ISO images are laid out by the package's own writer (isowriter.go, whose
// header lists the layout's rules), the only producer of ISO bytes. Its
// bytes are a format: recipes record an image's sha256 and a rebuild must
// give the same bytes, so a change of bytes is a new layout version
// (ISOLayout) that recipes record, and the old layouts stay buildable:
//   - ISOLayoutJolietTree (issue 35), every new image: the primary tree of
//     the go-diskfs layout plus a Joliet tree of every directory and file
//     (what Windows reads, so cloudbase-init finds
//     openstack\latest\meta_data.json). Names Joliet cannot hold are
//     refused (ErrInvalidSpec) rather than changed.
//   - ISOLayoutGoDiskfs, the layout of images built before issue 35 (a
//     recipe without iso-layout): the bytes go-diskfs v1.9.4 built, with
//     every date, owner and mode normalised (its tests keep go-diskfs as
//     the oracle; testdata/release holds images recorded by earlier code),
//     but for two deliberate differences: the Joliet root go-diskfs zeroed
//     in some images is kept whole (the zeroed form stays buildable for
//     rebuilds, legacyJolietRetry), and colliding short names are
//     renumbered in one fixed order instead of Go map order
//     (resolveCollisions; TestCollisionOrderIsGoDiskfsWalkOrder).
//
// vfat images are built and read with github.com/diskfs/go-diskfs. ISO
// images have one reader (isoread.go), used by Inspect, ReadFile and Write's
// check of the built image; Inspect reports whether an ISO image's Joliet
// tree matches its primary tree (Info.Joliet) and the layout it declares
// (Info.ISOLayout).
//
// Choices made here (see also docs in the functions):
//   - ISO images always carry Rock Ridge (what Linux cloud-init needs to see
//     long lowercase names) and, since issue 35, a Joliet tree of the whole
//     hierarchy (Windows). In the go-diskfs layout Joliet was added only when
//     every entry sits in the root directory (cidata), so config-2 images of
//     that layout are Rock Ridge only; it stays so for their rebuilds.
//   - Entry names are printable characters (UTF-8; non-ASCII only on ISO),
//     at most 64 characters (Joliet's limit) and 128 bytes per component.
//   - Files in ISO images get mode 0444 and directories 0555 (owner 0:0),
//     so any guest user can read them.
//   - vfat images are FAT12 sized from the content (minimum 1 MiB), which keeps
//     the FAT type consistent with the cluster count as every FAT reader expects.
//   - Output is byte-for-byte reproducible: the same Spec gives the same
//     image on any host at any time (a rebuild from a recipe relies on it).
//     Every date is Stamp's content-derived time (2000-01-01 plus a hash of
//     the content, in two-second steps, UTC), which keeps blkid's UUID
//     distinct for distinct contents; the FAT volume serial is the content
//     hash's. The ISO writer writes these values directly; go-diskfs stamps
//     FAT entries with the current time, so the finished vfat image is
//     normalised in place (normalize.go). The wall clock, time zone,
//     builder's uid/gid, umask, TMPDIR and SOURCE_DATE_EPOCH play no part.
package image

import (
	"errors"
	"os"
)

// Media selects the filesystem type of a payload image.
type Media string

const (
	// MediaISO is an ISO9660 image with Rock Ridge extensions.
	MediaISO Media = "iso"
	// MediaVFAT is a FAT12 image.
	MediaVFAT Media = "vfat"
	// MediaFloppy is a FAT12 image of a 1.44 MB floppy disk: FloppySize
	// bytes with the standard BPB (512-byte sectors, one per cluster, 224
	// root entries, 9 sectors per FAT, media 0xF0, 18 sectors per track,
	// 2 heads), the geometry QEMU's floppy drive and Windows' floppy
	// driver expect. Content that does not fit is refused (ErrTooLarge).
	// Its filesystem is vfat: Inspect reports FSTypeVFAT.
	MediaFloppy Media = "floppy"
)

// FloppySize is the size of a MediaFloppy image: a 3.5" high density
// disk, 80 tracks of 18 sectors of 512 bytes on 2 sides.
const FloppySize = 1474560

// FloppyCapacity is the most bytes one file in the root directory of a
// MediaFloppy image may have (Write keeps vfatOverhead free for the boot
// sector, the FATs and the root directory).
const FloppyCapacity = FloppySize - vfatOverhead

// isFAT reports whether media m is a FAT filesystem.
func isFAT(m Media) bool { return m == MediaVFAT || m == MediaFloppy }

// FSType values reported in Info.FSType (the names blkid uses).
const (
	FSTypeISO9660 = "iso9660"
	FSTypeVFAT    = "vfat"
)

// MaxContentBytes is the largest total size of all entry data accepted by Write.
const MaxContentBytes = 16 << 20

// MaxISOLabel and MaxVFATLabel are the longest labels each medium can carry.
const (
	MaxISOLabel  = 32
	MaxVFATLabel = 11
)

// DefaultMode is the permission of a written image when Options.Mode is 0.
const DefaultMode os.FileMode = 0o640

// ISOLayout is a version of the ISO 9660 layout Write produces. Image bytes
// are a format (recipes record an image's sha256 and a rebuild must give
// the same bytes), so a layout that changes bytes is a new version, and a
// recipe records the version its image was built with (docs/durability.md).
type ISOLayout uint8

const (
	// ISOLayoutLatest, the zero value, asks for the newest layout
	// (ISOLayoutNewest): what every new image gets.
	ISOLayoutLatest ISOLayout = 0
	// ISOLayoutGoDiskfs is the layout of images built before issue 35:
	// go-diskfs v1.9.4's, with Rock Ridge, and Joliet (the root only) when
	// every entry is in the root. With Options.ExpectSHA256 its pre-issue-14
	// variant with a zeroed Joliet root is accepted too. A recipe without an
	// iso-layout attribute was built with it.
	ISOLayoutGoDiskfs ISOLayout = 1
	// ISOLayoutJolietTree (issue 35) adds a Joliet tree of every directory
	// and file to every image, so Windows (cloudbase-init) sees
	// openstack\latest\meta_data.json. Its names must fit Joliet (see
	// Write).
	ISOLayoutJolietTree ISOLayout = 2
	// ISOLayoutNewest is the layout ISOLayoutLatest stands for.
	ISOLayoutNewest = ISOLayoutJolietTree
)

// Entry is one file to place in an image. Path is slash-separated and relative
// ("openstack/latest/meta_data.json"); parent directories are implied.
type Entry struct {
	Path string
	Data []byte
}

// Spec describes an image to build.
type Spec struct {
	Media   Media
	Label   string
	Entries []Entry
}

// Options control how the image file is placed on the host.
type Options struct {
	// Mode is the permission of the image file; 0 means DefaultMode (0640).
	Mode os.FileMode
	// GID is the group to give the image file; -1 leaves it as created.
	// 0 is a real group (root); callers that do not care must pass -1.
	GID int
	// NoSync skips the fsync of the image file and of its directory. The
	// write stays atomic (temporary file, verified, renamed into place), but
	// after a power loss the image may be missing or empty. It is for one-shot
	// builds whose caller decides about durability, like `vmpayload build`
	// (genisoimage and cloud-localds do not fsync either); the agent never
	// sets it.
	NoSync bool
	// ExpectSHA256, when set, is the hex SHA-256 the image must have: an
	// image built with other bytes is not written (the error wraps
	// ErrChecksum) and an existing out is left untouched. A rebuild from a
	// recipe uses it to refuse content that changed since the recording.
	// In ISOLayoutGoDiskfs, for an ISO spec whose image had go-diskfs's
	// zeroed Joliet root before issue 14's fix (the last file empty or a
	// multiple of 2048 bytes), the legacy variant is accepted too: when the
	// image does not have this hash and the legacy one does, the legacy
	// bytes are written, so an image recorded before the fix rebuilds to
	// its recorded bytes.
	ExpectSHA256 string
	// ISOLayout is the layout of an ISO image (ignored for vfat): the zero
	// value means the newest. A rebuild passes the layout its recipe
	// records.
	ISOLayout ISOLayout
}

// FileInfo describes a regular file inside an image.
type FileInfo struct {
	Path string // slash-separated, relative, e.g. "openstack/latest/meta_data.json"
	Size int64
}

// Info describes an image file.
type Info struct {
	Path   string     // path of the image on the host
	Label  string     // volume label / identifier, trailing blanks removed
	FSType string     // FSTypeISO9660 or FSTypeVFAT
	Size   int64      // size of the image file in bytes
	SHA256 string     // hex SHA-256 of the whole image file
	Files  []FileInfo // regular files, sorted by Path
	// ISOLayout is, for an ISO image, the layout Write built; from Inspect,
	// the layout the image declares: ISOLayoutJolietTree for images whose
	// application identifier names it, ISOLayoutGoDiskfs for every other
	// ISO image. 0 for vfat.
	ISOLayout ISOLayout
	// Joliet reports an ISO image whose Joliet tree lists exactly the files
	// of its primary tree, with the same extents: what Windows reads.
	Joliet bool
}

var (
	// ErrInvalidSpec marks an input error in a Spec: unknown media, bad label,
	// bad/duplicate entry path, or content too large. Retrying will not help.
	ErrInvalidSpec = errors.New("invalid image spec")
	// ErrTooLarge marks a Spec whose total content exceeds MaxContentBytes. Errors
	// carrying it also match ErrInvalidSpec.
	ErrTooLarge = errors.New("image content too large")
	// ErrVerify marks an image that, read back after writing, did not match the
	// spec (label, file list or file bytes).
	ErrVerify = errors.New("image verification failed")
	// ErrChecksum marks an image whose bytes do not hash to
	// Options.ExpectSHA256.
	ErrChecksum = errors.New("image checksum differs from the expected one")
	// ErrUnknownFormat marks a file that is neither an ISO9660 nor a FAT image,
	// or one too damaged to read.
	ErrUnknownFormat = errors.New("not a readable iso9660 or vfat image")
)
