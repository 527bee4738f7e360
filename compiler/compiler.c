// SPDX-License-Identifier: Apache-2.0
/*
 * Placeholder driver; replaced by the real pass driver.
 */
#include "compiler/compiler.h"
