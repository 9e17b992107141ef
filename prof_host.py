"""Scratch: host time vs GPU time per call on CUDA, and a cProfile of the host path."""
import cProfile, io, pstats, sys, time
import torch, specux

dev = "cuda"
g = torch.Generator(device=dev).manual_seed(0)
x = torch.randn(64, 160000, device=dev, generator=g)
S = specux.stft(x, n_fft=1024, hop_length=256)
P = dict(sr=16000, n_fft=1024, hop_length=256)
W = {
    "stft_c": lambda: specux.stft(x, n_fft=1024, hop_length=256),
    "stft_p": lambda: specux.stft(x, n_fft=1024, hop_length=256, output="power"),
    "mel": lambda: specux.melspectrogram(x, **P, n_mels=80),
    "istft": lambda: specux.istft(S, n_fft=1024, hop_length=256, length=160000),
    "mfcc": lambda: specux.mfcc(x, **P, n_mfcc=20, n_mels=80),
    "fft_small": lambda: specux.fft(x[:1, :1024]),
}
for f in W.values():
    for _ in range(5): f()
torch.cuda.synchronize()
for name, f in W.items():
    N = 200
    torch.cuda._sleep(2_000_000_000 // 1000 * 50)  # keep the GPU busy so host time shows
    t = time.perf_counter()
    for _ in range(N): f()
    host = (time.perf_counter() - t) / N * 1e3
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(100_000_000)
    s.record()
    for _ in range(N): f()
    e.record(); torch.cuda.synchronize()
    print(f"{name:10s} host {host:.4f} ms/call   queue-fed GPU {s.elapsed_time(e)/N:.4f} ms/call")
for name in sys.argv[1:]:
    f = W[name]
    pr = cProfile.Profile(); pr.enable()
    for _ in range(300): f()
    pr.disable(); torch.cuda.synchronize()
    out = io.StringIO()
    st = pstats.Stats(pr, stream=out).strip_dirs(); st.sort_stats("tottime").print_stats(35)
    st.sort_stats("cumulative").print_stats(45)
    print(f"===== {name}\n" + out.getvalue())
