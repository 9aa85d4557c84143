#!/usr/bin/env python3
"""Trains torchvision's resnet18 for a few steps on batches from stokerd.

    python3 train_resnet.py --address unix:/run/stoker/stoker.sock \
        --dataset train --pipeline train --batch-size 64 --steps 100

The pipeline must output `image` (float32 or float16, CHW) and `label`
(int64). The number of classes comes from the dataset. Runs on the GPU when
there is one (--device to choose), else on the CPU; prints the loss and
samples/s every --log-every steps and a summary at the end. Under torchrun
each process reads its own rank's share of every epoch.
"""
import argparse
import time

import torch
import torchvision

import stoker
from stoker.torch import Loader


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--address", default="unix:/run/stoker/stoker.sock",
                   help="stokerd's gRPC target: unix:PATH or HOST:PORT")
    p.add_argument("--dataset", default="train")
    p.add_argument("--pipeline", default="train")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--steps", type=int, default=100,
                   help="optimizer steps to run, across epochs")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--device", default=None,
                   help="cpu or cuda[:N]; default: cuda if available")
    p.add_argument("--transport", default="auto")
    p.add_argument("--log-every", type=int, default=1)
    return p.parse_args()


def main():
    args = parse_args()
    device = torch.device(args.device or
                          ("cuda" if torch.cuda.is_available() else "cpu"))
    client = stoker.Client(args.address)
    num_classes = len(client.dataset(args.dataset).classes)
    torch.manual_seed(args.seed)
    model = torchvision.models.resnet18(num_classes=num_classes).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    loader = Loader(client, args.dataset, args.pipeline, args.batch_size,
                    seed=args.seed, transport=args.transport, device=device)
    print(f"resnet18 on {device}, {num_classes} classes, {len(loader)} "
          f"steps per epoch, batch {args.batch_size}", flush=True)

    model.train()
    step = samples = 0
    started = window_start = time.perf_counter()
    window_samples = 0
    while step < args.steps:
        for batch in loader:  # One epoch.
            images = batch["image"].float()
            labels = batch["label"]
            loss = loss_fn(model(images), labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            step += 1
            samples += labels.shape[0]
            window_samples += labels.shape[0]
            if step % args.log_every == 0 or step == args.steps:
                loss_value = loss.item()  # Waits for the device.
                now = time.perf_counter()
                rate = window_samples / max(now - window_start, 1e-9)
                print(f"epoch {batch.epoch} step {step}: loss "
                      f"{loss_value:.4f}, {rate:.1f} samples/s", flush=True)
                window_start, window_samples = now, 0
            if step == args.steps:
                break
    seconds = time.perf_counter() - started
    print(f"done: {step} steps, {samples} samples in {seconds:.2f} s, "
          f"{samples / seconds:.1f} samples/s over {loader.transport}",
          flush=True)
    loader.close()


if __name__ == "__main__":
    main()
