# SPDX-License-Identifier: GPL-2.0-only
# Convenience wrapper around Kbuild; the build itself is described in Kbuild.
#   make [KDIR=/lib/modules/<release>/build] [W=1]
#   make kunit KDIR=<KUnit kernel build dir>    # adds kunit/*.ko (tests)
#   make dkms-src [DESTDIR=...]   # stage /usr/src/kverbs-<version> for dkms add
KDIR ?= /lib/modules/$(shell uname -r)/build

modules:
	$(MAKE) -C $(KDIR) M=$(CURDIR) modules

kunit:
	$(MAKE) -C $(KDIR) M=$(CURDIR) KVERBS_KUNIT=m modules

clean:
	$(MAKE) -C $(KDIR) M=$(CURDIR) clean

dkms-src:
	$(CURDIR)/scripts/dkms-src $(DESTDIR)

.PHONY: modules kunit clean dkms-src
