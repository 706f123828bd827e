"""kvroute serve in front of 3 sims: requests whose block keys carry extra keys (vLLM's rule,
kv/keys/extra_keys.h) are keyed as the engines key them, and only those requests match.

  - tenants (tenancy.from: header) get the router's cache_salt: two tenants sending the same
    prompt never see each other's blocks, neither in /debug/route nor in routing, and a
    tenant's follow-up still finds its own;
  - a LoRA adapter's follow-up turn goes to the worker holding the adapter's blocks, with
    cached_tokens > 0; the base model with the same text is credited nothing;
  - a chat with an image (image_url data URL), repeated, hits past the image; the same text
    with another image is credited (and served) only the blocks before the image;
  - parity is checked before the first request: every setting agrees with matching sims, and
    a wrong block size or another tokenizer is a warning naming the worker and the setting,
    and kvroute_parity_mismatch{worker,setting} 1.

predicted_ttl_s is short, so what the router credits after it comes from the engines' KV
events, not from its own routing history.

Usage: extra_keys_test.py <kvroute binary>"""

import json
import sys
import time

from cluster import Cases, Cluster, check, metric_sum, parse_prom, get, post, wait_until

binary = sys.argv[1]
cases = Cases()

TENANCY = """predicted_ttl_s: 0.2
tenancy:
  from: header
  header: X-Tenant
  salts: {acme: salt-acme}
  unlisted: derive
  secret: test-secret
"""

PROMPT = "A shared system prompt that two tenants both send, word for word. " * 12


def completion(c, tenant=None, prompt=PROMPT, model="sim-model", salt=None):
    body = {"model": model, "prompt": prompt, "max_tokens": 4, "ignore_eos": True}
    if salt:
        body["cache_salt"] = salt
    headers = {"X-Tenant": tenant} if tenant else {}
    status, hdrs, text = post(c.port, "/v1/completions", body, headers=headers)
    check(status == 200, "%s: %d %s" % (tenant, status, text))
    r = json.loads(text)
    return hdrs.get("x-kvroute-worker"), r["usage"]["prompt_tokens_details"]["cached_tokens"]


def route(c, body, tenant=None):
    headers = {"X-Tenant": tenant} if tenant else {}
    status, _, text = post(c.port, "/debug/route", body, headers=headers)
    check(status == 200, text)
    return json.loads(text)


def cached_by_worker(decision):
    return {cand["worker"]: cand.get("cached_any_blocks", 0) for cand in decision["candidates"]}


def predicted_cached_tokens(c):
    return metric_sum(parse_prom(get(c.port, "/metrics")[2]), "kvroute_predicted_cached_tokens_total")


with Cluster(binary, n=3, speedup=20, extra_yaml=TENANCY,
             sim_extra=["--lora-modules", "sql-lora=/adapters/sql"],
             worker_models=["sql-lora"]) as c:
    body = {"model": "sim-model", "prompt": PROMPT, "max_tokens": 4}

    def tenants_never_see_each_others_blocks():
        holder, cached = completion(c, "acme")
        check(cached == 0, "acme's first request hit %d tokens" % cached)
        time.sleep(0.5)  # past predicted_ttl_s: only the engine's events speak now
        full = route(c, body, "acme")["request"]["full_blocks"]
        check(full > 4, "prompt too short: %d blocks" % full)
        # acme's blocks arrive from the engine's events, salted, under acme's keys.
        d = wait_until(lambda: (lambda d: d if cached_by_worker(d)[holder] == full else None)(
            route(c, body, "acme")), timeout=10)
        check(d is not None, "acme's own blocks never appeared: %s" % route(c, body, "acme"))
        check(d["request"]["salted"] is True, d["request"])
        # Another tenant (listed or not), no tenant, and a client forging acme's salt: nothing.
        for who, extra in (("globex", {}), (None, {}), (None, {"cache_salt": "salt-acme"}),
                           (None, {"cache_salt": "9:salt-acme"}), ("globex",
                                                                   {"cache_salt": "salt-acme"})):
            seen = cached_by_worker(route(c, dict(body, **extra), who))
            check(all(v == 0 for v in seen.values()), "%s %s sees %s" % (who, extra, seen))
        # Routing: globex's request is credited no cached token, and the engine agrees.
        before = predicted_cached_tokens(c)
        _, cached = completion(c, "globex")
        check(cached == 0, "globex hit %d tokens of acme's" % cached)
        check(predicted_cached_tokens(c) == before, "the router credited globex with cache")
        # acme's follow-up still goes to its blocks.
        again, cached = completion(c, "acme")
        check(again == holder and cached >= full * 16 - 16,
              "acme's repeat went to %s (holder %s) with %d cached" % (again, holder, cached))

    def an_adapters_follow_up_goes_to_its_holder():
        messages = [{"role": "system", "content": "You write SQL for a warehouse schema. " * 15},
                    {"role": "user", "content": "List every table with more than ten columns."}]
        status, hdrs, text = post(c.port, "/v1/chat/completions", {
            "model": "sql-lora", "messages": messages, "max_tokens": 8, "ignore_eos": True})
        check(status == 200, text)
        holder = hdrs.get("x-kvroute-worker")
        answer = json.loads(text)["choices"][0]["message"]["content"]
        time.sleep(0.5)  # past predicted_ttl_s
        messages += [{"role": "assistant", "content": answer},
                     {"role": "user", "content": "Now only those in the sales schema."}]
        follow = {"model": "sql-lora", "messages": messages, "max_tokens": 8, "ignore_eos": True}
        d = wait_until(lambda: (lambda d: d if cached_by_worker(d)[holder] > 0 else None)(
            route(c, follow)), timeout=10)
        check(d is not None, "the adapter's blocks never appeared: %s" % route(c, follow))
        check(d["request"].get("lora_name") == "sql-lora", d["request"])
        status, hdrs, text = post(c.port, "/v1/chat/completions", follow)
        check(status == 200, text)
        cached = json.loads(text)["usage"]["prompt_tokens_details"]["cached_tokens"]
        check(hdrs.get("x-kvroute-worker") == holder and cached > 0,
              "follow-up went to %s (holder %s), cached %d" %
              (hdrs.get("x-kvroute-worker"), holder, cached))
        # The base model with the adapter's text is credited nothing: other keys.
        base = cached_by_worker(route(c, dict(follow, model="sim-model")))
        check(all(v == 0 for v in base.values()), "the base model sees %s" % base)

    def an_image_hits_only_with_the_same_image():
        def chat(image):
            return {"model": "sim-model", "max_tokens": 4, "ignore_eos": True, "messages": [
                {"role": "system", "content": "You describe product photos for a catalogue. " * 8},
                {"role": "user", "content": [
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64," + image}},
                    {"type": "text", "text": "Describe the item in the photo in one line."}]}]}
        first = chat("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")
        other = chat("R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7")
        status, hdrs, text = post(c.port, "/v1/chat/completions", first)
        check(status == 200, text)
        holder = hdrs.get("x-kvroute-worker")
        time.sleep(0.5)  # past predicted_ttl_s
        d = wait_until(lambda: (lambda d: d if cached_by_worker(d)[holder] > 0 else None)(
            route(c, first)), timeout=10)
        check(d is not None, "the image chat's blocks never appeared: %s" % route(c, first))
        image = d["request"]["images"][0]
        check(image["tokens"] == 64 and image["identifier"].startswith("kvimg-"), image)
        image_end_block = (image["offset"] + image["tokens"]) // 16
        check(cached_by_worker(d)[holder] > image_end_block,
              "the repeat is credited %d blocks, the image ends in block %d" %
              (cached_by_worker(d)[holder], image_end_block))
        status, hdrs, text = post(c.port, "/v1/chat/completions", first)
        check(status == 200, text)
        cached = json.loads(text)["usage"]["prompt_tokens_details"]["cached_tokens"]
        check(hdrs.get("x-kvroute-worker") == holder and cached > image["offset"] + image["tokens"],
              "the repeat went to %s (holder %s) with %d cached" %
              (hdrs.get("x-kvroute-worker"), holder, cached))
        # Another image in the same place: only the blocks before the image are shared.
        before_image = image["offset"] // 16
        seen = cached_by_worker(route(c, other))
        check(all(v <= before_image for v in seen.values()),
              "another image is credited %s (the image starts in block %d)" % (seen, before_image))
        status, hdrs, text = post(c.port, "/v1/chat/completions", other)
        check(status == 200, text)
        cached = json.loads(text)["usage"]["prompt_tokens_details"]["cached_tokens"]
        check(cached <= before_image * 16, "another image hit %d tokens" % cached)

    def parity_agrees_at_start():
        m = parse_prom(get(c.port, "/metrics")[2])
        rows = m.get("kvroute_parity_mismatch", [])
        check(len(rows) == 3 * 5, "one gauge per worker and setting: %s" % rows)
        check(all(v == 0 for _, v in rows), "a mismatch with matching sims: %s" % rows)
        check("mismatch" not in c.serve.stderr(), c.serve.stderr())

    cases.run("parity agrees at start with matching sims", parity_agrees_at_start)
    cases.run("tenants with different salts never see each other's blocks",
              tenants_never_see_each_others_blocks)
    cases.run("a LoRA adapter's follow-up turn goes to its holder with cached tokens",
              an_adapters_follow_up_goes_to_its_holder)
    cases.run("a chat with an image hits when repeated, not with another image",
              an_image_hits_only_with_the_same_image)


def mismatches(c):
    m = parse_prom(get(c.port, "/metrics")[2])
    return sorted((l["worker"], l["setting"]) for l, v in m.get("kvroute_parity_mismatch", [])
                  if v == 1)


with Cluster(binary, n=2, speedup=20, extra_yaml="block_size: 32\n") as c:

    def a_wrong_block_size_is_named_before_the_first_request():
        got = mismatches(c)
        check(got == [("w0", "block_size"), ("w1", "block_size")], got)
        err = c.serve.stderr()
        check("worker w0: block_size mismatch" in err and "worker w1: block_size mismatch" in err,
              err)

    cases.run("a wrong block size is named per worker before the first request",
              a_wrong_block_size_is_named_before_the_first_request)

with Cluster(binary, n=1, speedup=20, sim_extra=["--tokenizer", "qwen3"]) as c:

    def another_tokenizer_is_named_before_the_first_request():
        got = mismatches(c)
        check(("w0", "tokenizer") in got and ("w0", "chat_template") in got, got)
        check("worker w0: tokenizer mismatch" in c.serve.stderr(), c.serve.stderr())

    cases.run("another tokenizer is named before the first request",
              another_tokenizer_is_named_before_the_first_request)

cases.exit()
