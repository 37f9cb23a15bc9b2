// gpu-share: one generated token's decode step in one synchronous call, appended to node-llama-cpp's
// addon/AddonContext.cpp by scripts/llama-binding-patch.mjs when the binding is built on this
// machine (`npm run llama-binding:build`).
//
// Why: the binding's `decodeBatch` and `sampleToken` each queue a libuv worker and come back to
// the JavaScript thread, four thread wake-ups a token (~60 µs warm, ~170 µs on a window's first
// step after a pause, on one core). A paced engine pays them on every token and most of all when
// its window starts. Here the step is the calling thread's: put the token in the batch, decode
// it, sample its logits with the request's sampler and accept the token, as those two workers
// do. The prompt's batches keep the workers (a long prompt must not hold the JavaScript thread).
//
// gpuShareDecodeStep(sequenceId, position, token, sampler): the sampled token, or -1 when the
// sampler leaves none. Needs a batch (initBatch) of at least one token; throws what the workers
// would reject with.
Napi::Value AddonContext::GpuShareDecodeStep(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (disposed || ctx == nullptr) {
        Napi::Error::New(env, "Context is disposed").ThrowAsJavaScriptException();
        return env.Undefined();
    }
    if (info.Length() < 4 || !info[0].IsNumber() || !info[1].IsNumber() || !info[2].IsNumber() || !info[3].IsObject()) {
        Napi::TypeError::New(env, "gpuShareDecodeStep(sequenceId, position, token, sampler)").ThrowAsJavaScriptException();
        return env.Undefined();
    }
    if (!has_batch || batch_n_tokens < 1) {
        Napi::Error::New(env, "No batch is initialized").ThrowAsJavaScriptException();
        return env.Undefined();
    }
    const int32_t sequenceId = info[0].As<Napi::Number>().Int32Value();
    const int32_t position = info[1].As<Napi::Number>().Int32Value();
    const llama_token token = static_cast<llama_token>(info[2].As<Napi::Number>().Uint32Value());
    AddonSampler* sampler = Napi::ObjectWrap<AddonSampler>::Unwrap(info[3].As<Napi::Object>());

    common_batch_clear(batch);
    common_batch_add(batch, token, position, { sequenceId }, true);

    try {
        const int r = llama_decode(ctx, batch);
        if (r != 0) {
            Napi::Error::New(env, r == 1 ? "could not find a KV slot for the batch (try reducing the size of the batch or increase the context)" : "Eval has failed").ThrowAsJavaScriptException();
            return env.Undefined();
        }
        llama_synchronize(ctx);
        if (llama_get_logits(ctx) == nullptr) {
            Napi::Error::New(env, "This model does not support token generation").ThrowAsJavaScriptException();
            return env.Undefined();
        }
        sampler->rebuildChainIfNeeded();
        llama_token_data_array cur_p;
        sampler->sample(ctx, batch.n_tokens - 1, cur_p, false);
        if (cur_p.size == 0 || !(cur_p.selected >= 0 && cur_p.selected < static_cast<int64_t>(cur_p.size))) {
            return Napi::Number::New(env, -1);
        }
        const llama_token next = cur_p.data[cur_p.selected].id;
        sampler->acceptToken(next);
        return Napi::Number::New(env, static_cast<uint32_t>(next));
    } catch (const std::exception& e) {
        Napi::Error::New(env, std::string("gpuShareDecodeStep: ") + e.what()).ThrowAsJavaScriptException();
    } catch (...) {
        Napi::Error::New(env, "gpuShareDecodeStep: an unknown error").ThrowAsJavaScriptException();
    }
    return env.Undefined();
}
