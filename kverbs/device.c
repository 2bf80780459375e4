// SPDX-License-Identifier: GPL-2.0-only
/*
 * RDMA devices as they come and go.
 *
 * kverbs registers an ib_client.  Its add callback creates a kverbs_device;
 * its remove callback tears down every domain bound to the device (and with
 * them every endpoint) and waits until the last reference is gone, because
 * ib_core frees the ib_device right after remove returns.
 *
 * ib_core calls client remove callbacks in the reverse order of
 * registration, so ours runs before rdma_cm's: our endpoints' cm_ids on the
 * device are destroyed before rdma_cm would deliver DEVICE_REMOVAL to them.
 * Wildcard listeners are bound to no device and stay; a listener on a
 * specific address does get DEVICE_REMOVAL and goes dormant until a device
 * is added again (listen.c).
 */
#include <linux/slab.h>
#include <linux/xarray.h>

#include "kverbs-pri.h"

/* ib_device index -> kverbs_device; readers take a reference under RCU. */
static DEFINE_XARRAY(kverbs_devices);

static void kverbs_device_release(struct kref *ref)
{
	struct kverbs_device *kdev = container_of(ref, struct kverbs_device,
						  ref);

	complete(&kdev->released);
}

/**
 * kverbs_device_get - look up the kverbs_device of an ib_device
 * @ibdev: a registered device
 *
 * Context: any; does not sleep.
 * Return: a referenced device, or NULL if kverbs does not know @ibdev or it
 * is being removed.
 */
struct kverbs_device *kverbs_device_get(struct ib_device *ibdev)
{
	struct kverbs_device *kdev;

	rcu_read_lock();
	kdev = xa_load(&kverbs_devices, ibdev->index);
	if (kdev && (kdev->ibdev != ibdev || !kref_get_unless_zero(&kdev->ref)))
		kdev = NULL;
	rcu_read_unlock();
	return kdev;
}

void kverbs_device_put(struct kverbs_device *kdev)
{
	kref_put(&kdev->ref, kverbs_device_release);
}

/*
 * Called with dom->lock held.  Fails once removal has started, so that no
 * domain binds to a device whose remove callback already swept the list.
 */
int kverbs_device_attach_domain(struct kverbs_device *kdev,
				struct kverbs_domain *dom)
{
	int ret = 0;

	mutex_lock(&kdev->lock);
	if (kdev->dead)
		ret = -ENODEV;
	else
		list_add_tail(&dom->dev_node, &kdev->domains);
	mutex_unlock(&kdev->lock);
	return ret;
}
ALLOW_ERROR_INJECTION(kverbs_device_attach_domain, ERRNO);

void kverbs_device_detach_domain(struct kverbs_device *kdev,
				 struct kverbs_domain *dom)
{
	mutex_lock(&kdev->lock);
	list_del_init(&dom->dev_node);
	mutex_unlock(&kdev->lock);
}

static int kverbs_add_one(struct ib_device *ibdev)
{
	struct kverbs_device *kdev;
	int ret;

	kdev = kzalloc(sizeof(*kdev), GFP_KERNEL);
	if (!kdev)
		return -ENOMEM;
	kdev->ibdev = ibdev;
	kref_init(&kdev->ref);
	init_completion(&kdev->released);
	mutex_init(&kdev->lock);
	INIT_LIST_HEAD(&kdev->domains);

	ret = xa_insert(&kverbs_devices, ibdev->index, kdev, GFP_KERNEL);
	if (ret) {
		kfree(kdev);
		return ret;
	}
	pr_info("device %s added\n", dev_name(&ibdev->dev));
	kverbs_listeners_device_added();
	return 0;
}

static void kverbs_remove_one(struct ib_device *ibdev, void *client_data)
{
	struct kverbs_device *kdev = xa_load(&kverbs_devices, ibdev->index);
	struct kverbs_domain *dom;

	if (!kdev)
		return;

	mutex_lock(&kdev->lock);
	kdev->dead = true;
	mutex_unlock(&kdev->lock);

	/* Unbinding removes the domain from the list; take one at a time. */
	for (;;) {
		mutex_lock(&kdev->lock);
		dom = list_first_entry_or_null(&kdev->domains,
					       struct kverbs_domain, dev_node);
		if (dom)
			kverbs_domain_get(dom);
		mutex_unlock(&kdev->lock);
		if (!dom)
			break;
		kverbs_domain_unbind(dom);
		kverbs_domain_put(dom);
	}

	xa_erase(&kverbs_devices, ibdev->index);
	synchronize_rcu();
	kverbs_device_put(kdev);
	wait_for_completion(&kdev->released);
	pr_info("device %s removed\n", dev_name(&ibdev->dev));
	kfree(kdev);
}

static struct ib_client kverbs_ib_client = {
	.name = "kverbs",
	.add = kverbs_add_one,
	.remove = kverbs_remove_one,
};

int kverbs_device_init(void)
{
	return ib_register_client(&kverbs_ib_client);
}

void kverbs_device_exit(void)
{
	ib_unregister_client(&kverbs_ib_client);
	kverbs_listeners_exit();
	WARN_ON(!xa_empty(&kverbs_devices));
}
