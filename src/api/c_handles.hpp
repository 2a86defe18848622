// The C API's handles (communicators, requests, options, sparse results) are raw pointers a C
// caller can keep after destroying them. Every handle is recorded here while it lives, and every
// call checks its handle first: a destroyed or made-up handle is an invalid_argument error with
// a message, never a use after free (a destroyed communicator used to crash, or answer "ok"),
// and a second destroy is an error, not a double free. The check is one lookup under a mutex per
// call, never per block. A new handle may reuse a destroyed one's address; a stale pointer then
// names the new object, which no registry of raw pointers can tell apart.
#pragma once

#include "sparcoll/sparcoll.h"

namespace sparcoll::capi {

enum class HandleKind : unsigned char { comm, request, options, sparse_result };

// Records a handle just created.
void adopt(HandleKind kind, const void* handle);
// Forgets a handle about to be freed; false when it was not live (freed already, or never made).
bool release(HandleKind kind, const void* handle);
// SPARCOLL_SUCCESS when `handle` is a live handle of `kind`; otherwise records and returns
// invalid_argument naming `call` and `what` ("comm", "request", ...): null, or not live.
sparcoll_status_t check_handle(const char* call, const char* what, HandleKind kind, const void* handle);
// The same message for a destroy call given a handle that is not live.
sparcoll_status_t not_live(const char* call, const char* what, const void* handle);

}  // namespace sparcoll::capi
