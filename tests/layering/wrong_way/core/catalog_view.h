// A core header that reaches up into the node layer: the layering check must refuse it.
#pragma once

#include "core/units.h"
#include "node/device.h"
