// Checks of a path's kind before it is opened, so that nothing of the user's is read as what it
// is not (a FIFO blocks forever, a directory reads as a stream error): inputs must be readable
// regular files. Outputs follow train/output_policy.
#pragma once

#include <string>
#include <vector>

namespace strata {

// What an existing path that is not a regular file is ("a directory", "a FIFO (named pipe)", ...);
// empty for a regular file or a path that does not exist.
std::string non_regular_kind(const std::string& path);

// `what` names the flag ("--data"). Throws strata::Error with a sentence.
void require_input_file(const std::string& path, const std::string& what);

}  // namespace strata
