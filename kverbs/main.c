// SPDX-License-Identifier: GPL-2.0-only
/*
 * kverbs.ko: in-kernel RDMA endpoints (kverbs/) and messages on them
 * (kmsg/).  This file is the module's glue, the one place that knows
 * both layers: it registers kvmsg as the layer above kverbs.
 */
#include <linux/module.h>

#include "kverbs-pri.h"
#include "../kmsg/kvmsg-pri.h"

struct workqueue_struct *kverbs_wq;
const struct kverbs_upper_ops *kverbs_upper;

/*
 * Tuning that only tests need, kept out of the public domain attributes;
 * read when an endpoint connects (rnr_retry, ack_timeout) or is set up (the
 * interval).
 */
unsigned int kverbs_rnr_retry = 7;
module_param_named(rnr_retry, kverbs_rnr_retry, uint, 0644);
MODULE_PARM_DESC(rnr_retry,
		 "RNR retry count of new connections, 0..7 (7 = infinite); tests use 0 so that a flow-control bug fails instead of stalling");

/* See kverbs_conn_param(): the dead-peer bound is 7 x this timeout. */
unsigned int kverbs_ack_timeout = 17;
module_param_named(ack_timeout, kverbs_ack_timeout, uint, 0644);
MODULE_PARM_DESC(ack_timeout,
		 "RC ack timeout of new connections, 4.096 us * 2^N, 1..31; 17 (0.54 s) fails a send to a vanished peer in about 4 s");

unsigned int kverbs_signal_interval;
module_param_named(signal_interval, kverbs_signal_interval, uint, 0644);
MODULE_PARM_DESC(signal_interval,
		 "request a send completion at least every this many work requests of new endpoints (capped at the depth); 0 = depth / 4");

#ifdef KVERBS_TESTING
/*
 * Test builds only (KVERBS_KUNIT=m): widen race windows so that the
 * regression tests hit them every time.  Never in the DKMS package.
 */
unsigned int kverbs_test_unbind_delay_ms;
module_param_named(test_unbind_delay_ms, kverbs_test_unbind_delay_ms, uint,
		   0644);
MODULE_PARM_DESC(test_unbind_delay_ms,
		 "test builds: sleep this long inside domain unbind");

unsigned int kverbs_test_listen_delay_ms;
module_param_named(test_listen_delay_ms, kverbs_test_listen_delay_ms, uint,
		   0644);
MODULE_PARM_DESC(test_listen_delay_ms,
		 "test builds: a new listening id waits this long before it is published");

unsigned int kverbs_test_connect_delay_ms;
module_param_named(test_connect_delay_ms, kverbs_test_connect_delay_ms, uint,
		   0644);
MODULE_PARM_DESC(test_connect_delay_ms,
		 "test builds: an active endpoint's handshake end and kverbs_ep_connect()'s deadline each sleep this long");

/*
 * Test builds only: undo one fix each (KVERBS_UNDO_*), so that its
 * regression scenario can show once more that it fails without it.
 */
unsigned int kverbs_test_undo_mask;
module_param_named(test_undo, kverbs_test_undo_mask, uint, 0644);
MODULE_PARM_DESC(test_undo,
		 "test builds: undo fixes (1: reads without a callback, 2: teardown on the deferral workqueue, 4: accept depth clamp, 8: deferred handlers wait for a peer's credits, 16: a connect deadline decided outside ep->lock, 32: listener removal acting on its state, not on the removed id)");

/*
 * Test builds only: an active endpoint sends a proof a peer must refuse
 * (KVERBS_TEST_AUTH_*), so a suite shows the accepting side's check work.
 */
unsigned int kverbs_test_auth_mask;
module_param_named(test_auth, kverbs_test_auth_mask, uint, 0644);
MODULE_PARM_DESC(test_auth,
		 "test builds: send a proof the peer must refuse (1: one bit flipped, 2: the previous connection's)");
#endif

static int __init kverbs_init(void)
{
	int ret;

	kverbs_upper = &kvmsg_upper_ops;
	kverbs_wq = alloc_workqueue("kverbs", 0, 0);
	if (!kverbs_wq)
		return -ENOMEM;
	kverbs_debugfs_init();
	ret = kverbs_device_init();
	if (ret) {
		pr_err("cannot register ib_client: %d\n", ret);
		kverbs_debugfs_exit();
		destroy_workqueue(kverbs_wq);
		return ret;
	}
	return 0;
}

static void __exit kverbs_exit(void)
{
	kverbs_device_exit();
	kverbs_debugfs_exit();
	destroy_workqueue(kverbs_wq);	/* runs pending domain frees */
}

module_init(kverbs_init);
module_exit(kverbs_exit);

MODULE_DESCRIPTION("kverbs: in-kernel RDMA endpoints and messages");
MODULE_LICENSE("GPL");
MODULE_VERSION(KVERBS_VERSION);
