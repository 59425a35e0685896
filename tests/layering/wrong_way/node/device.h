// Node may include core: this include is allowed.
#pragma once

#include "core/catalog_view.h"
