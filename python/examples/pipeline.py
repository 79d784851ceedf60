"""100 ready jobs, 4 slots: `python pipeline.py out.jsonl`, then `tpscope report out.jsonl`."""
import asyncio, sys
import tpscope

async def main(path):
    rec = tpscope.Recorder(path, cap=4, labels={"job": "example"})
    slots = asyncio.Semaphore(4)
    async def job(i):
        async with rec.request(f"job-{i}") as r:  # queued now
            async with slots:
                r.admitted()  #                      took a slot
                for _ in range(8):
                    await asyncio.sleep(0.002)  #    the model streams a token
                    r.tokens(1)  # (tpscope.openai.instrument(client, rec) does this for you)
    await asyncio.gather(*(job(i) for i in range(100)))
    rec.close()
    print("gap fraction", tpscope.analyze(path)["runs"][0]["gap_fraction"])

asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "pipeline.jsonl"))
