package libvirtx

/*
#cgo pkg-config: libvirt
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
*/
import "C"

import "fmt"

// ErrorNumber is libvirt's virErrorNumber: what went wrong.
type ErrorNumber int

// ErrorDomain is libvirt's virErrorDomain: which part of libvirt reported it.
type ErrorDomain int

// ErrorLevel is libvirt's virErrorLevel.
type ErrorLevel int

// Error numbers the agent and shim look at. The values are libvirt's.
const (
	ERR_OK                    = ErrorNumber(C.VIR_ERR_OK)
	ERR_INTERNAL_ERROR        = ErrorNumber(C.VIR_ERR_INTERNAL_ERROR)
	ERR_NO_MEMORY             = ErrorNumber(C.VIR_ERR_NO_MEMORY)
	ERR_NO_SUPPORT            = ErrorNumber(C.VIR_ERR_NO_SUPPORT)
	ERR_NO_CONNECT            = ErrorNumber(C.VIR_ERR_NO_CONNECT)
	ERR_INVALID_CONN          = ErrorNumber(C.VIR_ERR_INVALID_CONN)
	ERR_INVALID_DOMAIN        = ErrorNumber(C.VIR_ERR_INVALID_DOMAIN)
	ERR_INVALID_ARG           = ErrorNumber(C.VIR_ERR_INVALID_ARG)
	ERR_OPERATION_FAILED      = ErrorNumber(C.VIR_ERR_OPERATION_FAILED)
	ERR_XML_DETAIL            = ErrorNumber(C.VIR_ERR_XML_DETAIL)
	ERR_XML_ERROR             = ErrorNumber(C.VIR_ERR_XML_ERROR)
	ERR_SYSTEM_ERROR          = ErrorNumber(C.VIR_ERR_SYSTEM_ERROR)
	ERR_RPC                   = ErrorNumber(C.VIR_ERR_RPC)
	ERR_NO_DOMAIN             = ErrorNumber(C.VIR_ERR_NO_DOMAIN)
	ERR_OPERATION_INVALID     = ErrorNumber(C.VIR_ERR_OPERATION_INVALID)
	ERR_CONFIG_UNSUPPORTED    = ErrorNumber(C.VIR_ERR_CONFIG_UNSUPPORTED)
	ERR_OPERATION_TIMEOUT     = ErrorNumber(C.VIR_ERR_OPERATION_TIMEOUT)
	ERR_AUTH_FAILED           = ErrorNumber(C.VIR_ERR_AUTH_FAILED)
	ERR_OPERATION_UNSUPPORTED = ErrorNumber(C.VIR_ERR_OPERATION_UNSUPPORTED)
	ERR_AGENT_UNRESPONSIVE    = ErrorNumber(C.VIR_ERR_AGENT_UNRESPONSIVE)
	ERR_DEVICE_MISSING        = ErrorNumber(C.VIR_ERR_DEVICE_MISSING)
)

// Error domains the shim looks at. The values are libvirt's.
const (
	FROM_NONE   = ErrorDomain(C.VIR_FROM_NONE)
	FROM_XEN    = ErrorDomain(C.VIR_FROM_XEN)
	FROM_REMOTE = ErrorDomain(C.VIR_FROM_REMOTE)
	FROM_RPC    = ErrorDomain(C.VIR_FROM_RPC)
	FROM_QEMU   = ErrorDomain(C.VIR_FROM_QEMU)
	FROM_TEST   = ErrorDomain(C.VIR_FROM_TEST)
	FROM_DOMAIN = ErrorDomain(C.VIR_FROM_DOMAIN)
)

// Error levels.
const (
	ERR_NONE    = ErrorLevel(C.VIR_ERR_NONE)
	ERR_WARNING = ErrorLevel(C.VIR_ERR_WARNING)
	ERR_ERROR   = ErrorLevel(C.VIR_ERR_ERROR)
)

// Error is a libvirt error as reported by virGetLastError for the failing
// call. Methods of this package return it as a value of type Error.
type Error struct {
	Code    ErrorNumber
	Domain  ErrorDomain
	Message string
	Level   ErrorLevel
}

// Error implements the error interface.
func (e Error) Error() string {
	return fmt.Sprintf("libvirt error (code=%d, domain=%d): %s", int(e.Code), int(e.Domain), e.Message)
}

// lastError converts libvirt's thread-local last error into an Error. It must
// run on the same OS thread as the failing call, so callers lock the OS
// thread around the call and this conversion.
func lastError() Error {
	verr := C.virGetLastError()
	if verr == nil {
		return Error{Code: ERR_INTERNAL_ERROR, Domain: FROM_NONE, Message: "libvirt call failed without setting an error", Level: ERR_ERROR}
	}
	e := Error{
		Code:   ErrorNumber(verr.code),
		Domain: ErrorDomain(verr.domain),
		Level:  ErrorLevel(verr.level),
	}
	if verr.message != nil {
		e.Message = C.GoString(verr.message)
	}
	C.virResetLastError()
	return e
}
