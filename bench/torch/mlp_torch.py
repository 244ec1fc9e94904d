"""The MLP training step of examples/graph_mlp.c in PyTorch: the same sizes
(128-256-16, batch 64), the same hand-written backward and SGD update in
place. Shared by bench_graph_torch.py (eager and graph timings) and
scripts/profile.sh mlp (where the step's GPU time goes)."""
import torch

B, DIN, HID, DOUT = 64, 128, 256, 16


class Mlp:
    """Data, initial and current weights, constants; step() trains once and
    leaves the loss in self.loss."""

    def __init__(self):
        gen = torch.Generator().manual_seed(0)
        x = (torch.rand(B, DIN, generator=gen) * 2 - 1).cuda()
        self.x = x
        self.t = (x[:, :DOUT] * x[:, DOUT:2 * DOUT] - 0.5 * x[:, 2 * DOUT:3 * DOUT]).contiguous()
        self.w1_0 = ((torch.rand(DIN, HID, generator=gen) * 2 - 1) * DIN ** -0.5).cuda()
        self.w2_0 = ((torch.rand(HID, DOUT, generator=gen) * 2 - 1) * HID ** -0.5).cuda()
        self.w1, self.w2 = self.w1_0.clone(), self.w2_0.clone()
        self.lr = torch.tensor(0.05, device="cuda")
        self.zero = torch.tensor(0.0, device="cuda")
        self.scale = torch.tensor(2.0 / (B * DOUT), device="cuda")
        self.loss = None

    def reset(self):
        self.w1.copy_(self.w1_0)
        self.w2.copy_(self.w2_0)

    def step(self):
        h = self.x @ self.w1
        a = torch.relu(h)
        p = a @ self.w2
        d = p - self.t
        self.loss = (d * d).mean()
        dp = d * self.scale
        dw2 = a.t() @ dp
        da = dp @ self.w2.t()
        dh = torch.where(h > self.zero, da, self.zero)
        dw1 = self.x.t() @ dh
        self.w1.copy_(self.w1 - dw1 * self.lr)
        self.w2.copy_(self.w2 - dw2 * self.lr)
