package delivery

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/vmpayload/vmpayload/libvirtx"
	"github.com/vmpayload/vmpayload/libvirtx/domxml"
	"github.com/vmpayload/vmpayload/payload/guestreport"
	"github.com/vmpayload/vmpayload/payload/recipe"
	"libvirt.org/go/libvirt"
)

// WithRecipe edits ed, a session on domainXML, to hold recipeEl as the
// domain's only vmpayload recipe, or no recipe when recipeEl is "", and the
// guest report channel when guest is set (else not): the channel goes with
// the payload. A recipe equal to the one already there is left as it is
// (libvirt may have re-serialised it).
func WithRecipe(ed *domxml.Edit, domainXML, recipeEl string, guest bool) error {
	var err error
	if guest {
		_, err = ed.SetGuestChannel(guestreport.Channel)
	} else {
		_, err = ed.RemoveGuestChannel(guestreport.Channel)
	}
	if err != nil {
		return err
	}
	if recipeEl == "" {
		_, err := ed.RemoveMetadata(recipe.Namespace)
		return err
	}
	// Only a document naming the recipe namespace can hold a recipe (as
	// libvirt writes metadata back, the URI is there literally): a domain
	// without one, the usual first job, skips a pass over its XML. The
	// session's edits so far (drive, channel) leave <metadata> alone, so
	// the recipe there is the one domainXML has.
	if strings.Contains(domainXML, recipe.Namespace) {
		if cur, ok, err := recipe.FromDocument(ed); err == nil && ok {
			// cur renders as it was read (sealed, or in clear if written
			// before sealing, which is then rewritten sealed)
			if el, err := cur.Element(nil); err == nil && el == recipeEl {
				return nil
			}
		}
	}
	return ed.SetMetadata(recipe.Namespace, recipeEl)
}

// RecordLiveRecipe puts recipeEl (or, when "", no recipe) into the running
// domain's live definition too. A redefine changes only the next boot's;
// a live migration, save or managed save carries the live one to where the
// libvirt hook rebuilds the image, and it must name the image the drive
// holds now, not the one the domain started with (issue 36: after a live
// media change, a migration made the destination's hook rebuild the old
// image). Hosts without LiveMetadataSetter (the fake) skip it.
func RecordLiveRecipe(ctx context.Context, h libvirtx.Host, dom libvirtx.DomainInfo, recipeEl string) error {
	s, ok := h.(libvirtx.LiveMetadataSetter)
	if !ok {
		return nil
	}
	if err := s.SetLiveMetadata(ctx, dom.UUID, recipe.MetadataContent(recipeEl), recipe.Prefix, recipe.Namespace); err != nil {
		var le libvirt.Error
		if libvirtx.IsNotFound(err) || errors.As(err, &le) && le.Code == libvirt.ERR_OPERATION_INVALID {
			return nil // stopped meanwhile ("domain is not running"): the persistent definition is what counts
		}
		return fmt.Errorf("recording the payload recipe in the live definition of %s: %w", dom.Name, err)
	}
	return nil
}
