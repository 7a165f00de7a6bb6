// Package runtime is the memory side of the canonical ABI for Go guests, under the import path
// the wit-bindgen Go generator uses: Allocate (memory the host reads, pinned so the garbage
// collector neither moves nor frees it while the host holds its address), Unpin (after the
// generated code has copied what the host wrote) and the cabi_realloc export the host calls to
// write arguments and results into the guest.
package runtime

import (
	"fmt"
	"runtime"
	"unsafe"
)

// Allocate returns size bytes aligned to align, zeroed, pinned by pinner.
func Allocate(pinner *runtime.Pinner, size, align uintptr) unsafe.Pointer {
	p := allocate(size, align)
	if p != nil {
		pinner.Pin(p)
	}
	return p
}

func allocate(size, align uintptr) unsafe.Pointer {
	if size == 0 {
		return nil
	}
	// A slice of the alignment's word size is aligned to it.
	words := (size + align - 1) / align
	switch align {
	case 1:
		return unsafe.Pointer(unsafe.SliceData(make([]uint8, words)))
	case 2:
		return unsafe.Pointer(unsafe.SliceData(make([]uint16, words)))
	case 4:
		return unsafe.Pointer(unsafe.SliceData(make([]uint32, words)))
	case 8:
		return unsafe.Pointer(unsafe.SliceData(make([]uint64, words)))
	}
	panic(fmt.Sprintf("cabi_realloc: alignment %d is not one of 1, 2, 4, 8", align))
}

// What the host wrote through cabi_realloc stays pinned until the generated code has read it.
var hostWritten runtime.Pinner

// Unpin releases what the host wrote during the last call.
func Unpin() { hostWritten.Unpin() }

// The runtime's own allocator, for calls that come before the Go runtime is initialized.
//
//go:linkname sbrk runtime.sbrk
func sbrk(n uintptr) unsafe.Pointer

// procPin and procUnpin keep the garbage collector from starting while cabi_realloc runs: the
// component model forbids calling imports there, and a collection reads clocks through them.
//
//go:linkname procPin runtime.procPin
func procPin() int

//go:linkname procUnpin runtime.procUnpin
func procUnpin()

// The preview 1 adapter's switch that keeps its monotonic clock from calling the host meanwhile.
//
//go:wasmimport wasi_snapshot_preview1 adapter_monotonic_clock_set_paused
func clockPaused(paused bool)

var initialized = false

func init() { initialized = true }

//go:wasmexport cabi_realloc
func cabiRealloc(old unsafe.Pointer, oldSize, align, newSize uintptr) unsafe.Pointer {
	if old != nil || oldSize != 0 {
		panic("cabi_realloc: growing a block is not supported")
	}
	if !initialized {
		pad := func(p uintptr) uintptr { return (p + align - 1) &^ (align - 1) }
		raw := uintptr(sbrk(newSize + align))
		return unsafe.Pointer(pad(raw))
	}
	procPin()
	clockPaused(true)
	p := Allocate(&hostWritten, newSize, align)
	clockPaused(false)
	procUnpin()
	return p
}
