// SPDX-License-Identifier: GPL-2.0-only
/*
 * Managed regions: pages owned by the module, mapped into one process
 * through a file, and the fault path that enforces their protection.
 *
 * Mapping rules (refused with -EINVAL/-EBUSY at mmap time, or by the VMA
 * callbacks): MAP_SHARED, offset 0, exactly the region's size, one mapping
 * at a time.  The VMA is VM_PFNMAP (entries point at our pages; no
 * rmap, no swap), VM_DONTCOPY (a fork()ed child gets no mapping),
 * VM_IO, VM_DONTEXPAND and VM_DONTDUMP; it cannot be split (partial munmap
 * or mprotect) or moved (mremap).
 *
 * VM_IO is what keeps VM_DONTCOPY: madvise(MADV_DOFORK), the only way to
 * clear it, fails with -EINVAL on a VM_IO VMA (mm/madvise.c, 6.1 and
 * 6.12).  A copied VMA would carry copies of our entries into the child,
 * where no revoke of this region could be relied on to reach them.
 * VM_IO changes nothing else for this VMA: get_user_pages(), KSM, mlock
 * and core dumps already skip it as VM_PFNMAP and VM_DONTDUMP.
 *
 * Every region file has an inode of its own, so revokes zap through the
 * file's address_space (unmap_mapping_pages()): that walks the VMAs still
 * linked to the file under i_mmap_rwsem, and munmap unlinks a VMA there
 * before it frees its page tables, so no cached VMA pointer is trusted.
 *
 * Fault path: an access the page's protection allows installs an entry
 * with the lesser of that protection and the VMA's (read-only for READ or
 * for a mapping without PROT_WRITE, so a write faults again through
 * ->pfn_mkwrite, or is refused by the core).  A forbidden access calls
 * the client's ->fault, one callback outstanding per page, then waits
 * killably with the fault's lock dropped until the access is allowed or
 * the outstanding callback was answered by a grant that does not allow
 * it; the core retries the fault, which calls the client again for what
 * is still missing.  A fatal signal ends the wait and the task exits
 * normally.  Access to a destroyed region raises SIGBUS.
 */
#include <linux/anon_inodes.h>
#include <linux/file.h>
#include <linux/highmem.h>
#include <linux/mm.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>

#include "kvmem-pri.h"

static void kvmem_region_release(struct kref *ref)
{
	struct kvmem_region *r = container_of(ref, struct kvmem_region, ref);
	u32 i;

	for (i = 0; i < r->npages; i++)
		if (r->pages[i])
			__free_page(r->pages[i]);
	kvfree(r->pages);
	kvfree(r->prot);
	bitmap_free(r->mapped);
	bitmap_free(r->pending);
	bitmap_free(r->failed);
	bitmap_free(r->want_write);
	cleanup_srcu_struct(&r->client_srcu);
	kfree(r);
}

void kvmem_region_get(struct kvmem_region *r)
{
	kref_get(&r->ref);
}

void kvmem_region_put(struct kvmem_region *r)
{
	kref_put(&r->ref, kvmem_region_release);
}

/**
 * kvmem_region_create - a region of zeroed pages owned by kvmem
 * @npages: 1..KVMEM_MAX_PAGES
 * @prot: initial protection of every page (KVMEM_PROT_*)
 * @ops: callbacks (@ops->fault required)
 * @priv: passed to @ops, returned by kvmem_region_priv()
 *
 * Context: process; may sleep.
 * Return: the region, ERR_PTR(-EINVAL) or ERR_PTR(-ENOMEM).
 */
struct kvmem_region *kvmem_region_create(u32 npages, u32 prot,
					 const struct kvmem_ops *ops, void *priv)
{
	struct kvmem_region *r;
	u32 i;

	might_sleep();
	if (!npages || npages > KVMEM_MAX_PAGES || prot > KVMEM_PROT_RW ||
	    !ops || !ops->fault)
		return ERR_PTR(-EINVAL);
	r = kzalloc(sizeof(*r), GFP_KERNEL);
	if (!r)
		return ERR_PTR(-ENOMEM);
	if (init_srcu_struct(&r->client_srcu)) {
		kfree(r);
		return ERR_PTR(-ENOMEM);
	}
	kref_init(&r->ref);
	spin_lock_init(&r->lock);
	mutex_init(&r->pt_lock);
	init_waitqueue_head(&r->wait);
	r->npages = npages;
	r->ops = ops;
	r->priv = priv;
	r->pages = kvcalloc(npages, sizeof(*r->pages), GFP_KERNEL);
	r->prot = kvmalloc(npages, GFP_KERNEL);
	r->mapped = bitmap_zalloc(npages, GFP_KERNEL);
	r->pending = bitmap_zalloc(npages, GFP_KERNEL);
	r->failed = bitmap_zalloc(npages, GFP_KERNEL);
	r->want_write = bitmap_zalloc(npages, GFP_KERNEL);
	if (!r->pages || !r->prot || !r->mapped || !r->pending || !r->failed ||
	    !r->want_write)
		goto fail;
	memset(r->prot, prot, npages);
	for (i = 0; i < npages; i++) {
		r->pages[i] = alloc_page(GFP_KERNEL | __GFP_ZERO);
		if (!r->pages[i])
			goto fail;
	}
	return r;
fail:
	kvmem_region_put(r);
	return ERR_PTR(-ENOMEM);
}
EXPORT_SYMBOL_NS_GPL(kvmem_region_create, KVERBS_NS);
ALLOW_ERROR_INJECTION(kvmem_region_create, ERRNO);

/*
 * Enter a section in which a client callback may run: the SRCU index, or
 * -ENODEV once kvmem_region_destroy() set @client_gone (the region is
 * dying; its faults end in SIGBUS).  Pair with kvmem_client_exit().
 */
int kvmem_client_enter(struct kvmem_region *r)
{
	int idx = srcu_read_lock(&r->client_srcu);

	if (!READ_ONCE(r->client_gone))
		return idx;
	srcu_read_unlock(&r->client_srcu, idx);
	return -ENODEV;
}

void kvmem_client_exit(struct kvmem_region *r, int idx)
{
	srcu_read_unlock(&r->client_srcu, idx);
}

/**
 * kvmem_region_destroy - end a region
 * @r: region from kvmem_region_create()
 *
 * Every page-table entry goes, waiting faults end, and any later access
 * through a remaining mapping raises SIGBUS.  Client callbacks in progress
 * finish first (a client wakes its own blocked ones before), and none runs
 * after this returns: the client may free the region's @priv and @ops.  The
 * pages are freed when the last file and mapping of the region are gone.
 *
 * Context: process, not from a callback of @r; sleeps.
 */
void kvmem_region_destroy(struct kvmem_region *r)
{
	WRITE_ONCE(r->client_gone, true);
	/*
	 * Dead first: a callback in progress may itself wait in a fault of
	 * this region (an ioctl's copy_to_user() into it), which only the
	 * dead region's wake-up ends.
	 */
	kvmem_protect_locked_zap(r, NULL, 0, KVMEM_PROT_NONE, true);
	synchronize_srcu(&r->client_srcu);
	kvmem_region_put(r);
}
EXPORT_SYMBOL_NS_GPL(kvmem_region_destroy, KVERBS_NS);

/**
 * kvmem_region_pages - the region's pages, for RDMA registration
 * @r: region
 * @npages: set to the number of pages
 *
 * Context: any.
 * Return: the page array, valid until the region is released.
 */
struct page **kvmem_region_pages(struct kvmem_region *r, u32 *npages)
{
	*npages = r->npages;
	return r->pages;
}
EXPORT_SYMBOL_NS_GPL(kvmem_region_pages, KVERBS_NS);

/**
 * kvmem_region_priv - the client's pointer
 * @r: region
 *
 * Context: any.
 * Return: @priv of kvmem_region_create().
 */
void *kvmem_region_priv(const struct kvmem_region *r)
{
	return r->priv;
}
EXPORT_SYMBOL_NS_GPL(kvmem_region_priv, KVERBS_NS);

/*
 * Entry protection: what both the page (@prot) and the VMA allow.  The
 * VMA's flags are stable under the fault's lock; mprotect() of the whole
 * VMA changes existing entries itself and later faults follow vm_flags.
 */
static pgprot_t kvmem_pgprot(struct vm_area_struct *vma, u32 prot)
{
	vm_flags_t flags = vma->vm_flags &
			   (VM_READ | VM_WRITE | VM_EXEC | VM_SHARED);

	if (prot != KVMEM_PROT_RW)
		flags &= ~VM_WRITE;
	return vm_get_page_prot(flags);
}

/* The access may go ahead, or must end in SIGBUS: no more waiting. */
static bool kvmem_access_ok(struct kvmem_region *r, u32 idx, bool write)
{
	return kvmem_gone(r, idx) ||
	       kvmem_prot_allows(READ_ONCE(r->prot[idx]), write);
}

/*
 * A waiter is done when its access is allowed, or when the callback its
 * need waits on has been answered (a grant cleared @pending) without
 * allowing it: then the retry asks the client again.
 */
static bool kvmem_wait_done(struct kvmem_region *r, u32 idx, bool write)
{
	return kvmem_access_ok(r, idx, write) || !test_bit(idx, r->pending);
}

/* The client's fault callback, unless the region is being destroyed. */
static void kvmem_call(struct kvmem_region *r, u32 idx, bool write)
{
	int srcu = kvmem_client_enter(r);

	if (srcu >= 0) {
		atomic64_inc(&r->callbacks);
		r->ops->fault(r, idx, write, r->priv);
		kvmem_client_exit(r, srcu);
	}
}

/*
 * Make page @idx allow the access, calling the client first unless a
 * callback for the page is already outstanding.  Returns 0 when allowed
 * (fault lock still held), VM_FAULT_SIGBUS for a dead region, or
 * VM_FAULT_RETRY.
 *
 * No wait holds the fault's lock: a task blocked on mmap_lock (another
 * thread's mmap(), a queued writer) would otherwise wait for the grant
 * too.  As handle_userfault() does, every fault that allows a retry
 * (FAULT_FLAG_ALLOW_RETRY, first try or FAULT_FLAG_TRIED) waits with the
 * lock dropped and returns VM_FAULT_RETRY; the core retries it for as long
 * as it returns that, and stops at a fatal signal.  A fault that cannot be
 * retried (fixup_user_fault() without @unlocked, as futex uses) succeeds
 * only if the callback granted the access at once, and otherwise gets
 * VM_FAULT_SIGBUS (-EFAULT for its caller) without waiting; its callback
 * stays outstanding.
 */
static vm_fault_t kvmem_wait_access(struct kvmem_region *r, u32 idx,
				    bool write, struct vm_fault *vmf)
{
	bool call;

	spin_lock_bh(&r->lock);
	if (kvmem_gone(r, idx)) {
		spin_unlock_bh(&r->lock);
		return VM_FAULT_SIGBUS;
	}
	if (kvmem_prot_allows(r->prot[idx], write)) {
		/*
		 * A read that may restart a write ->pfn_mkwrite turned away
		 * (@want_write): ask the client for write access, once, but
		 * do not wait for it; the read goes ahead.
		 */
		call = !write && test_bit(idx, r->want_write) &&
		       !kvmem_prot_allows(r->prot[idx], true) &&
		       !test_and_set_bit(idx, r->pending);
		spin_unlock_bh(&r->lock);
		if (call) {
			atomic64_inc(&r->write_faults);
			kvmem_call(r, idx, true);
		}
		return 0;
	}
	call = !test_and_set_bit(idx, r->pending);
	spin_unlock_bh(&r->lock);

	/* One count per access: a retry of it is the same fault. */
	if (!(vmf->flags & FAULT_FLAG_TRIED))
		atomic64_inc(write ? &r->write_faults : &r->read_faults);
	if (call)
		kvmem_call(r, idx, write);
	if (kvmem_access_ok(r, idx, write))
		return kvmem_gone(r, idx) ? VM_FAULT_SIGBUS : 0;
	if (!(vmf->flags & FAULT_FLAG_ALLOW_RETRY))
		return VM_FAULT_SIGBUS;
	if (vmf->flags & FAULT_FLAG_RETRY_NOWAIT)
		return VM_FAULT_RETRY;
	kvmem_region_get(r);	/* the VMA may go once unlocked */
	kverbs_release_fault_lock(vmf);
	/* A fatal signal ends the wait; the core sees it before retrying. */
	wait_event_killable(r->wait, kvmem_wait_done(r, idx, write));
	kvmem_region_put(r);
	return VM_FAULT_RETRY;
}

static vm_fault_t kvmem_fault(struct vm_fault *vmf)
{
	struct vm_area_struct *vma = vmf->vma;
	struct kvmem_region *r = vma->vm_private_data;
	bool write = vmf->flags & FAULT_FLAG_WRITE;
	u32 idx = vmf->pgoff;
	vm_fault_t ret;
	u32 prot;

	if (idx >= r->npages)
		return VM_FAULT_SIGBUS;
	for (;;) {
		ret = kvmem_wait_access(r, idx, write, vmf);
		if (ret)
			return ret;
		/* Install under pt_lock, from the protection read under it. */
		mutex_lock(&r->pt_lock);
		spin_lock_bh(&r->lock);
		prot = r->prot[idx];
		if (kvmem_gone(r, idx) || !kvmem_prot_allows(prot, write)) {
			spin_unlock_bh(&r->lock);
			mutex_unlock(&r->pt_lock);
			continue;	/* revoked meanwhile */
		}
		set_bit(idx, r->mapped);
		if (prot == KVMEM_PROT_RW)
			clear_bit(idx, r->want_write);
		spin_unlock_bh(&r->lock);
		ret = vmf_insert_pfn_prot(vma, vmf->address,
					  page_to_pfn(r->pages[idx]),
					  kvmem_pgprot(vma, prot));
		mutex_unlock(&r->pt_lock);
		return ret;
	}
}

/*
 * A write to a read-only entry.  Allowed: the core makes the entry
 * writable, unless a revoke replaced it meanwhile, which sends the access
 * round again.  Not allowed: ->pfn_mkwrite cannot drop the fault lock (the
 * core goes on to the page table after it), so it removes the read-only
 * entry and lets the access fault again through kvmem_fault(), which can
 * wait without the lock.
 */
static vm_fault_t kvmem_pfn_mkwrite(struct vm_fault *vmf)
{
	struct vm_area_struct *vma = vmf->vma;
	struct kvmem_region *r = vma->vm_private_data;
	u32 idx = vmf->pgoff;
	u32 prot;
	bool gone;

	if (idx >= r->npages)
		return VM_FAULT_SIGBUS;
	spin_lock_bh(&r->lock);
	prot = r->prot[idx];
	gone = kvmem_gone(r, idx);
	spin_unlock_bh(&r->lock);
	if (gone)
		return VM_FAULT_SIGBUS;
	if (prot == KVMEM_PROT_RW) {
		clear_bit(idx, r->want_write);
		return 0;
	}
	mutex_lock(&r->pt_lock);
	spin_lock_bh(&r->lock);
	clear_bit(idx, r->mapped);
	set_bit(idx, r->want_write);
	spin_unlock_bh(&r->lock);
	zap_vma_ptes(vma, vmf->address & PAGE_MASK, PAGE_SIZE);
	mutex_unlock(&r->pt_lock);
	return VM_FAULT_NOPAGE;
}

/*
 * The VMA's entries are gone and it is unlinked from @mapping; it still
 * holds its file, so a revoke that read @mapping under @pt_lock is done
 * with it once we have @pt_lock.
 */
static void kvmem_vm_close(struct vm_area_struct *vma)
{
	struct kvmem_region *r = vma->vm_private_data;

	mutex_lock(&r->pt_lock);
	spin_lock_bh(&r->lock);
	if (r->vma == vma) {
		r->vma = NULL;
		r->mapping = NULL;
		bitmap_zero(r->mapped, r->npages);
		bitmap_zero(r->want_write, r->npages);	/* no access left */
	}
	spin_unlock_bh(&r->lock);
	mutex_unlock(&r->pt_lock);
}

static int kvmem_vm_may_split(struct vm_area_struct *vma, unsigned long addr)
{
	return -EINVAL;
}

static int kvmem_vm_mremap(struct vm_area_struct *vma)
{
	return -EINVAL;
}

static const struct vm_operations_struct kvmem_vm_ops = {
	.close = kvmem_vm_close,
	.may_split = kvmem_vm_may_split,
	.mremap = kvmem_vm_mremap,
	.fault = kvmem_fault,
	.pfn_mkwrite = kvmem_pfn_mkwrite,
};

static int kvmem_file_mmap(struct file *f, struct vm_area_struct *vma)
{
	struct kvmem_region *r = f->private_data;
	int ret = 0;

	if (!(vma->vm_flags & VM_SHARED) || vma->vm_pgoff ||
	    vma->vm_end - vma->vm_start != (unsigned long)r->npages << PAGE_SHIFT)
		return -EINVAL;
	mutex_lock(&r->pt_lock);
	spin_lock_bh(&r->lock);
	if (r->dead) {
		ret = -ENODEV;
	} else if (r->vma) {
		ret = -EBUSY;
	} else {
		r->vma = vma;
		r->mapping = f->f_mapping;
	}
	spin_unlock_bh(&r->lock);
	mutex_unlock(&r->pt_lock);
	if (ret)
		return ret;
	/* VM_IO: madvise(MADV_DOFORK) cannot clear VM_DONTCOPY (see top). */
	kverbs_vm_flags_set(vma, VM_PFNMAP | VM_IO | VM_DONTCOPY |
			    VM_DONTEXPAND | VM_DONTDUMP);
	vma->vm_private_data = r;
	vma->vm_ops = &kvmem_vm_ops;
	return 0;
}

/*
 * The file's last reference: the client lets go of what it tied to @f
 * (kvmem_ops.release), unless it destroyed the region already.  @ops is
 * read only inside the client section: once destroy returned, the client
 * module and its ops may be gone while this file lives on.
 */
static int kvmem_file_release(struct inode *inode, struct file *f)
{
	struct kvmem_region *r = f->private_data;
	int idx = kvmem_client_enter(r);

	if (idx >= 0) {
		if (r->ops->release)
			r->ops->release(r, f, r->priv);
		kvmem_client_exit(r, idx);
	}
	kvmem_region_put(r);
	return 0;
}

static const struct file_operations kvmem_region_fops = {
	.owner = THIS_MODULE,
	.mmap = kvmem_file_mmap,
	.release = kvmem_file_release,
	.unlocked_ioctl = kvmem_region_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.llseek = noop_llseek,
};

/**
 * kvmem_region_fd - a file descriptor a process can mmap() the region with
 * @r: region
 *
 * Installed in the calling process's file table; the file holds a
 * reference to the region.  Each file has an anonymous inode of its own,
 * whose address_space revokes zap through.
 *
 * Context: process.
 * Return: the descriptor, or a negative errno.
 */
int kvmem_region_fd(struct kvmem_region *r)
{
	int fd;

	kvmem_region_get(r);
	fd = kverbs_anon_inode_getfd_own("kvmem", &kvmem_region_fops, r,
					 O_RDWR | O_CLOEXEC);
	if (fd < 0)
		kvmem_region_put(r);
	return fd;
}
EXPORT_SYMBOL_NS_GPL(kvmem_region_fd, KVERBS_NS);
ALLOW_ERROR_INJECTION(kvmem_region_fd, ERRNO);
