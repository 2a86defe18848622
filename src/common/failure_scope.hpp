// Which failures end only the collective they happened in and which break the communicator:
// the one rule the block-sparse engine, the collective thread and the point-to-point layer
// share (docs/errors.md).
#pragma once

#include "sparcoll/status.hpp"

namespace sparcoll {

// True for failures every rank learns of through an abort, after which the communicator still
// works: a rank's bad arguments (invalid_argument), ranks that disagree (mismatch), something not
// supported for these arguments (unsupported), and a rank that could not get the memory the
// collective needs (no_resource: an abort carries it only for a local allocation failure). Any
// other failure (a dead peer, a timeout, a corrupt message) leaves the processes' streams or
// state out of step: the communicator breaks.
inline bool fails_only_the_collective(ErrorCode code) noexcept {
  return code == ErrorCode::invalid_argument || code == ErrorCode::mismatch || code == ErrorCode::unsupported ||
         code == ErrorCode::no_resource;
}

}  // namespace sparcoll
