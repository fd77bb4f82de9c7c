"""PyTorch eager baseline: RMSNorm backward as autograd runs it through an fp32 eager RMSNorm.

The forward it differentiates is ``y = (x.float() * rstd) * weight.float()`` with the ``rstd`` the
forward saved; these are the ops autograd's backward of that graph launches, in its order.
"""

import torch


def forward(dy, x, weight, rstd):
    xf, dyf, wf = x.float(), dy.float(), weight.float()
    r = rstd.unsqueeze(-1)
    x_hat = xf * r
    dw = (dyf * x_hat).sum(dim=0)
    g = dyf * wf                                     # gradient reaching x_hat
    dx = r * (g - x_hat * (g * x_hat).mean(dim=-1, keepdim=True))
    return dx.to(x.dtype), dw
