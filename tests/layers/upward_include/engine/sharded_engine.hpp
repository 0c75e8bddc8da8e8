// Fixture for the layer check: an engine header including a core one, which is allowed.
#pragma once
#include "core/error.hpp"
