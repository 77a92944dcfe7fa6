// SPDX-License-Identifier: GPL-2.0
/*
 * ocfw_testaes: a test-only crypto engine for ocfw's kernel-in-the-loop
 * tests. It registers an asynchronous cbc(aes) skcipher, driver
 * "ocfw_testaes_cbc", above the kernel's software, and does correct
 * AES-CBC with the kernel's AES library after a per-request delay: a
 * stand-in for a card's setup cost, so small requests lose to software
 * and large ones can win. On demand it corrupts its output, so tests can
 * watch the firmware catch a wrong engine.
 *
 * Requests go through one ordered workqueue, one at a time, as through a
 * card with one engine: the delay limits throughput, not only latency.
 *
 * Parameters (delay_us and corrupt_min writable at runtime under
 * /sys/module/ocfw_testaes/parameters/):
 *   delay_us     sleep this many microseconds before each request (0: none)
 *   corrupt_min  corrupt every request of at least this many bytes (0: never)
 *   priority     the algorithm's priority, read at load (default 300)
 */
#include <linux/module.h>
#include <linux/workqueue.h>
#include <linux/delay.h>
#include <linux/bottom_half.h>
#include <crypto/aes.h>
#include <crypto/algapi.h>
#include <crypto/internal/skcipher.h>

static unsigned int delay_us;
module_param(delay_us, uint, 0644);
MODULE_PARM_DESC(delay_us, "delay before each request, in microseconds (0: none)");

static unsigned int corrupt_min;
module_param(corrupt_min, uint, 0644);
MODULE_PARM_DESC(corrupt_min, "corrupt every request of at least this many bytes (0: never)");

static int priority = 300;
module_param(priority, int, 0444);
MODULE_PARM_DESC(priority, "cbc(aes) priority, read at load (kernel software is 100)");

static struct workqueue_struct *testaes_wq;

struct testaes_req {
	struct work_struct work;
	struct skcipher_request *req;
	bool enc;
};

static int testaes_setkey(struct crypto_skcipher *tfm, const u8 *key, unsigned int len)
{
	return aes_expandkey(crypto_skcipher_ctx(tfm), key, len);
}

/* testaes_cbc runs the request synchronously: AES-CBC block by block. */
static int testaes_cbc(struct skcipher_request *req, bool enc)
{
	const struct crypto_aes_ctx *ctx = crypto_skcipher_ctx(crypto_skcipher_reqtfm(req));
	unsigned int min = READ_ONCE(corrupt_min);
	bool corrupt = min && req->cryptlen >= min;
	struct skcipher_walk walk;
	u8 buf[AES_BLOCK_SIZE], next[AES_BLOCK_SIZE];
	unsigned int n;
	int err;

	err = skcipher_walk_virt(&walk, req, false);
	while ((n = walk.nbytes) != 0) {
		const u8 *src = walk.src.virt.addr;
		u8 *dst = walk.dst.virt.addr;
		u8 *first = dst;
		u8 *iv = walk.iv;
		unsigned int left = n;

		for (; left >= AES_BLOCK_SIZE; left -= AES_BLOCK_SIZE, src += AES_BLOCK_SIZE, dst += AES_BLOCK_SIZE) {
			if (enc) {
				crypto_xor_cpy(buf, src, iv, AES_BLOCK_SIZE);
				aes_encrypt(ctx, dst, buf);
				memcpy(iv, dst, AES_BLOCK_SIZE);
			} else {
				memcpy(next, src, AES_BLOCK_SIZE); /* src may be dst */
				aes_decrypt(ctx, buf, src);
				crypto_xor_cpy(dst, buf, iv, AES_BLOCK_SIZE);
				memcpy(iv, next, AES_BLOCK_SIZE);
			}
		}
		if (corrupt && n >= AES_BLOCK_SIZE) {
			/* One flipped bit in the first output block, as a bad card might. */
			first[0] ^= 0x01;
			corrupt = false;
		}
		err = skcipher_walk_done(&walk, left);
	}
	memzero_explicit(buf, sizeof(buf));
	return err;
}

static void testaes_work(struct work_struct *work)
{
	struct testaes_req *rctx = container_of(work, struct testaes_req, work);
	struct skcipher_request *req = rctx->req;
	unsigned int us = READ_ONCE(delay_us);
	int err;

	if (us)
		fsleep(us);
	err = testaes_cbc(req, rctx->enc);
	/* Completion callbacks (ESP among them) expect softirqs off. */
	local_bh_disable();
	skcipher_request_complete(req, err);
	local_bh_enable();
}

static int testaes_queue(struct skcipher_request *req, bool enc)
{
	struct testaes_req *rctx = skcipher_request_ctx(req);

	if (req->cryptlen % AES_BLOCK_SIZE)
		return -EINVAL;
	if (!req->cryptlen)
		return 0;
	rctx->req = req;
	rctx->enc = enc;
	INIT_WORK(&rctx->work, testaes_work);
	queue_work(testaes_wq, &rctx->work);
	return -EINPROGRESS;
}

static int testaes_encrypt(struct skcipher_request *req) { return testaes_queue(req, true); }
static int testaes_decrypt(struct skcipher_request *req) { return testaes_queue(req, false); }

static int testaes_init_tfm(struct crypto_skcipher *tfm)
{
	crypto_skcipher_set_reqsize(tfm, sizeof(struct testaes_req));
	return 0;
}

static struct skcipher_alg testaes_alg = {
	.base = {
		.cra_name = "cbc(aes)",
		.cra_driver_name = "ocfw_testaes_cbc",
		.cra_flags = CRYPTO_ALG_ASYNC | CRYPTO_ALG_KERN_DRIVER_ONLY,
		.cra_blocksize = AES_BLOCK_SIZE,
		.cra_ctxsize = sizeof(struct crypto_aes_ctx),
		.cra_module = THIS_MODULE,
	},
	.min_keysize = AES_MIN_KEY_SIZE,
	.max_keysize = AES_MAX_KEY_SIZE,
	.ivsize = AES_BLOCK_SIZE,
	.setkey = testaes_setkey,
	.encrypt = testaes_encrypt,
	.decrypt = testaes_decrypt,
	.init = testaes_init_tfm,
};

static int __init testaes_init(void)
{
	int err;

	testaes_wq = alloc_ordered_workqueue("ocfw_testaes", WQ_MEM_RECLAIM);
	if (!testaes_wq)
		return -ENOMEM;
	testaes_alg.base.cra_priority = priority;
	err = crypto_register_skcipher(&testaes_alg);
	if (err)
		destroy_workqueue(testaes_wq);
	return err;
}

static void __exit testaes_exit(void)
{
	crypto_unregister_skcipher(&testaes_alg);
	destroy_workqueue(testaes_wq);
}

module_init(testaes_init);
module_exit(testaes_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("ocfw test engine: asynchronous cbc(aes) with a delay and optional corruption (test only)");
