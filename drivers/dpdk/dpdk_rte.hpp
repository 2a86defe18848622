// The DPDK headers the driver uses, in one place. drivers/dpdk/meson.build puts their folders on
// the include path as system folders: they do not compile warning-free under C++20 (-Wvolatile).
#pragma once

#include <rte_config.h>

#include <rte_bus_vdev.h>
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_eal_memconfig.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_flow.h>
#include <rte_lcore.h>
#include <rte_log.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_ring.h>
#include <rte_version.h>
