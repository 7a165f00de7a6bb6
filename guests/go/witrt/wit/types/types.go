// Package types holds the generic WIT types the wit-bindgen Go generator refers to (option,
// result, the unit type). Written for this repository, under the import path the generated code
// uses, so that guests build without a module download.
package types

// Unit is WIT's `_`: the payload of a result without a value.
type Unit struct{}

// The cases of an option.
const (
	OptionNone uint8 = 0
	OptionSome uint8 = 1
)

// Option is WIT's option<T>.
type Option[T any] struct {
	tag   uint8
	value T
}

func (o Option[T]) Tag() uint8 { return o.tag }

// Some is the value; it panics on none.
func (o Option[T]) Some() T {
	if o.tag != OptionSome {
		panic("option is none")
	}
	return o.value
}

func None[T any]() Option[T]    { return Option[T]{} }
func Some[T any](v T) Option[T] { return Option[T]{OptionSome, v} }

// The cases of a result.
const (
	ResultOk  uint8 = 0
	ResultErr uint8 = 1
)

// Result is WIT's result<T, E>.
type Result[T, E any] struct {
	tag uint8
	ok  T
	err E
}

func (r Result[T, E]) Tag() uint8 { return r.tag }

// Ok is the success value; it panics on an error.
func (r Result[T, E]) Ok() T {
	if r.tag != ResultOk {
		panic("result is an error")
	}
	return r.ok
}

// Err is the error value; it panics on success.
func (r Result[T, E]) Err() E {
	if r.tag != ResultErr {
		panic("result is ok")
	}
	return r.err
}

func Ok[T, E any](v T) Result[T, E]  { return Result[T, E]{tag: ResultOk, ok: v} }
func Err[T, E any](e E) Result[T, E] { return Result[T, E]{tag: ResultErr, err: e} }
