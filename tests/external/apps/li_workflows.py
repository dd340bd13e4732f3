"""LlamaIndex workflows and agents guides:

- "Workflows" (module_guides/workflow/index.md): the `JokeFlow` example, its `run`, streaming
  events written with `ctx.write_event_to_stream`, and state kept in the `Context` store;

      class JokeFlow(Workflow):
          llm = OpenAI()
          @step
          async def generate_joke(self, ev: StartEvent) -> JokeEvent:
              prompt = f"Write your best joke about {ev.topic}."
              response = await self.llm.acomplete(prompt)
              return JokeEvent(joke=str(response))
          @step
          async def critique_joke(self, ev: JokeEvent) -> StopEvent:
              prompt = f"Give a thorough analysis and critique of the following joke: {ev.joke}"
              response = await self.llm.acomplete(prompt)
              return StopEvent(result=str(response))

- "Agents" (understanding/agent/index.md): a `FunctionAgent` with one tool;

      def multiply(a: float, b: float) -> float:
          '''Useful for multiplying two numbers.'''
          return a * b
      agent = FunctionAgent(tools=[multiply], llm=llm,
                            system_prompt="You are a helpful assistant that can multiply two numbers.")
      response = await agent.run("What is 1234 * 4567?")

Changes: `OpenAI()` -> `OpenAILike` on the test vLLM server (passed to the flow's constructor
instead of a class attribute; a function-calling model for the agent, as the guide's OpenAI
model is); the joke flow's progress event and context state are the guide's "Streaming events"
and "Maintaining state" sections applied to the same flow.
"""

from __future__ import annotations

from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.workflow import Context, Event, StartEvent, StopEvent, Workflow, step


class JokeEvent(Event):
    joke: str


class ProgressEvent(Event):
    msg: str


class JokeFlow(Workflow):
    def __init__(self, llm, **kwargs) -> None:
        super().__init__(**kwargs)
        self.llm = llm

    @step
    async def generate_joke(self, ctx: Context, ev: StartEvent) -> JokeEvent:
        topic = ev.topic
        await ctx.store.set("topic", topic)
        prompt = f"Write your best joke about {topic}."
        response = await self.llm.acomplete(prompt)
        ctx.write_event_to_stream(ProgressEvent(msg=f"joke about {topic}"))
        return JokeEvent(joke=str(response))

    @step
    async def critique_joke(self, ctx: Context, ev: JokeEvent) -> StopEvent:
        joke = ev.joke
        prompt = f"Give a thorough analysis and critique of the following joke: {joke}"
        response = await self.llm.acomplete(prompt)
        topic = await ctx.store.get("topic")
        return StopEvent(result=f"{topic}: {response}")


def joke_flow(llm):
    return JokeFlow(llm, timeout=60, verbose=False)


def multiply(a: float, b: float) -> float:
    """Useful for multiplying two numbers."""
    return a * b


def agent(llm):
    return FunctionAgent(
        tools=[multiply],
        llm=llm,
        system_prompt="You are a helpful assistant that can multiply two numbers.",
    )
