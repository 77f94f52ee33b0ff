"""The first release of each engine whose model registry lists an architecture: an older
release has no native implementation of it, so it refuses the model or, where the installed
transformers implements it, runs it through its Transformers backend (neither of which a plan
models).

Read in every release's wheel (`pip download vllm==X` / `sglang==X --no-deps`): vLLM's
`vllm/model_executor/models/registry.py` (`models/__init__.py` 0.2.5-0.5.x, `model_loader.py`'s
`_MODEL_REGISTRY` before), SGLang's `EntryClass` names in `sglang/srt/models/*.py`; releases
0.2.0-0.34.0 and 0.3.0-0.5.23, post releases skipped (the first group is the oldest release's
whole registry). An architecture a later release dropped is not tracked.
"""

from __future__ import annotations

from planner.core.engines.common import ENGINE_NAMES, parse_version

# vllm: the release that first lists each architecture (0.2.0-0.34.0 read).
# fmt: off
VLLM_ARCHITECTURES_SINCE: dict[str, tuple[str, ...]] = {
    "0.2.0": (
        "AquilaModel", "BaiChuanForCausalLM", "BaichuanForCausalLM", "BloomForCausalLM",
        "FalconForCausalLM", "GPT2LMHeadModel", "GPTBigCodeForCausalLM", "GPTJForCausalLM",
        "GPTNeoXForCausalLM", "InternLMForCausalLM", "LLaMAForCausalLM", "LlamaForCausalLM",
        "MPTForCausalLM", "MistralForCausalLM", "OPTForCausalLM", "QWenLMHeadModel",
        "RWForCausalLM",
    ),
    "0.2.2": (
        "AquilaForCausalLM", "ChatGLMModel", "MptForCausalLM", "PhiForCausalLM", "YiForCausalLM",
    ),
    "0.2.4": ("ChatGLMForConditionalGeneration", "MixtralForCausalLM",),
    "0.2.7": ("DeciLMForCausalLM",),
    "0.3.0": (
        "DeepseekForCausalLM", "QuantMixtralForCausalLM", "Qwen2ForCausalLM",
        "StableLMEpochForCausalLM",
    ),
    "0.3.1": ("InternLM2ForCausalLM",),
    "0.3.2": ("GemmaForCausalLM", "OLMoForCausalLM",),
    "0.3.3": ("OrionForCausalLM", "StableLmForCausalLM", "Starcoder2ForCausalLM",),
    "0.4.0": (
        "CohereForCausalLM", "DbrxForCausalLM", "JAISLMHeadModel", "LlavaForConditionalGeneration",
        "Qwen2MoeForCausalLM", "XverseForCausalLM",
    ),
    "0.4.1": ("MiniCPMForCausalLM",),
    "0.4.2": ("OlmoForCausalLM", "Phi3ForCausalLM",),
    "0.4.3": ("ArcticForCausalLM", "MistralModel", "Phi3SmallForCausalLM",),
    "0.5.0": ("LlavaNextForConditionalGeneration",),
    "0.5.1": (
        "DeepseekV2ForCausalLM", "Gemma2ForCausalLM", "JambaForCausalLM",
        "MLPSpeculatorPreTrainedModel", "Phi3VForCausalLM",
    ),
    "0.5.2": (
        "FuyuForCausalLM", "MedusaModel", "PaliGemmaForConditionalGeneration",
        "PersimmonForCausalLM",
    ),
    "0.5.3": ("ChameleonForCausalLM", "ChameleonForConditionalGeneration",),
    "0.5.4": (
        "Blip2ForConditionalGeneration", "InternVLChatModel", "MiniCPMV", "NemotronForCausalLM",
    ),
    "0.5.5": ("BartForConditionalGeneration", "BartModel", "EAGLEModel", "UltravoxModel",),
    "0.6.0": ("ExaoneForCausalLM", "GraniteForCausalLM", "PhiMoEForCausalLM",),
    "0.6.1": (
        "LlavaNextVideoForConditionalGeneration", "PixtralForConditionalGeneration",
        "Qwen2VLForConditionalGeneration",
    ),
    "0.6.2": (
        "LlavaOnevisionForConditionalGeneration", "MiniCPM3ForCausalLM",
        "MllamaForConditionalGeneration", "OlmoeForCausalLM", "SolarForCausalLM",
    ),
    "0.6.3": (
        "Gemma2Model", "GraniteMoeForCausalLM", "MambaForCausalLM", "MolmoForCausalLM", "NVLM_D",
        "Qwen2ForRewardModel",
    ),
    "0.6.4": (
        "BertModel", "FalconMambaForCausalLM", "Florence2ForConditionalGeneration",
        "H2OVLChatModel", "Idefics3ForConditionalGeneration", "InternLM2VEForCausalLM",
        "LlamaModel", "Qwen2AudioForConditionalGeneration", "Qwen2ForSequenceClassification",
        "Qwen2Model", "RobertaModel", "XLMRobertaModel",
    ),
    "0.6.5": (
        "AriaForConditionalGeneration", "BertForSequenceClassification", "Cohere2ForCausalLM",
        "GlmForCausalLM", "GritLM", "MantisForConditionalGeneration", "Olmo2ForCausalLM",
        "RobertaForMaskedLM", "RobertaForSequenceClassification", "TeleChat2ForCausalLM",
        "XLMRobertaForSequenceClassification",
    ),
    "0.6.6": ("DeepseekV3ForCausalLM", "JambaForSequenceClassification",),
    "0.7.0": (
        "DeepseekVLV2ForCausalLM", "Fairseq2LlamaForCausalLM", "InternLM2ForRewardModel",
        "InternLM3ForCausalLM", "Qwen2ForProcessRewardModel", "WhisperForConditionalGeneration",
    ),
    "0.7.1": ("MiniCPMO",),
    "0.7.2": ("Qwen2_5_VLForConditionalGeneration", "TransformersModel",),
    "0.7.3": (
        "BambaForCausalLM", "DeepSeekMTPModel", "GLM4VForCausalLM", "Mamba2ForCausalLM",
        "PrithviGeoSpatialMAE", "QwenVLForConditionalGeneration",
    ),
    "0.8.0": (
        "Gemma3ForCausalLM", "Gemma3ForConditionalGeneration", "GraniteMoeSharedForCausalLM",
        "Grok1ModelForCausalLM", "Phi4MMForCausalLM", "Zamba2ForCausalLM",
    ),
    "0.8.2": ("TeleFLMForCausalLM",),
    "0.8.3": (
        "AyaVisionForConditionalGeneration", "Llama4ForCausalLM", "Llama4ForConditionalGeneration",
        "MiniMaxText01ForCausalLM", "Mistral3ForConditionalGeneration", "SkyworkR1VChatModel",
        "TransformersForCausalLM",
    ),
    "0.8.4": (
        "EagleLlamaForCausalLM", "Glm4ForCausalLM", "Qwen3ForCausalLM", "Qwen3MoeForCausalLM",
        "SmolVLMForConditionalGeneration",
    ),
    "0.8.5": (
        "Eagle3LlamaForCausalLM", "GraniteSpeechForConditionalGeneration", "GteModel",
        "KimiVLForConditionalGeneration", "ModernBertForSequenceClassification", "NomicBertModel",
        "Plamo2ForCausalLM", "Qwen2_5OmniModel",
    ),
    "0.9.0": (
        "FalconH1ForCausalLM", "GraniteMoeHybridForCausalLM", "GteNewModel", "MiMoForCausalLM",
        "MiMoMTPModel", "MiniMaxVL01ForConditionalGeneration", "ModernBertModel", "Ovis",
        "Qwen2_5OmniForConditionalGeneration",
    ),
    "0.9.1": (
        "EagleMiniCPMForCausalLM", "NemotronHForCausalLM", "TarsierForConditionalGeneration",
    ),
    "0.9.2": (
        "Dots1ForCausalLM", "Ernie4_5_ForCausalLM", "Ernie4_5_MoeForCausalLM",
        "GPT2ForSequenceClassification", "Gemma3nForConditionalGeneration",
        "Glm4vForConditionalGeneration", "HunYuanMoEV1ForCausalLM", "KeyeForConditionalGeneration",
        "MiniMaxM1ForCausalLM", "Qwen3ForSequenceClassification",
        "Tarsier2ForConditionalGeneration",
    ),
    "0.10.0": (
        "ArceeForCausalLM", "BailingMoeForCausalLM", "EagleLlama4ForCausalLM", "Exaone4ForCausalLM",
        "Glm4MoeForCausalLM", "Glm4MoeMTPModel", "HunYuanDenseV1ForCausalLM", "JinaVLForRanking",
        "Llama_Nemotron_Nano_VL", "MiniMaxForCausalLM", "Phi4FlashForCausalLM",
        "TransformersForMultimodalLM", "VoxtralForConditionalGeneration",
    ),
    "0.10.1": (
        "Cohere2VisionForConditionalGeneration", "Emu3ForConditionalGeneration",
        "Ernie4_5ForCausalLM", "Gemma3nForCausalLM", "Glm4vMoeForConditionalGeneration",
        "GptOssForCausalLM", "HCXVisionForCausalLM", "InternS1ForConditionalGeneration",
        "LlamaForCausalLMEagle3", "MBartForConditionalGeneration", "Phi4MultimodalForCausalLM",
        "SmolLM3ForCausalLM", "Step3TextForCausalLM", "Step3VLForConditionalGeneration",
    ),
    "0.10.2": (
        "ApertusForCausalLM", "DonutForConditionalGeneration", "EagleDeepSeekMTPModel",
        "Ernie4_5_VLMoeForConditionalGeneration", "ErnieMTPModel", "Gemma3TextModel",
        "GteNewForSequenceClassification", "InternVLForConditionalGeneration",
        "KeyeVL1_5ForConditionalGeneration", "Lfm2ForCausalLM", "MiDashengLMModel",
        "MotifForCausalLM", "NemotronH_Nano_VL", "Ovis2_5", "Qwen3NextForCausalLM", "Qwen3NextMTP",
        "RForConditionalGeneration", "SeedOssForCausalLM", "Terratorch",
    ),
    "0.11.0": (
        "BailingMoeV2ForCausalLM", "BertForTokenClassification", "CwmForCausalLM",
        "DeepseekV32ForCausalLM", "DotsOCRForCausalLM", "LongCatFlashMTPModel",
        "LongcatFlashForCausalLM", "NemotronH_Nano_VL_V2", "Olmo3ForCausalLM",
        "Qwen3VLForConditionalGeneration", "Qwen3VLMoeForConditionalGeneration",
    ),
    "0.11.1": (
        "AfmoeForCausalLM", "BeeForConditionalGeneration", "BertSpladeSparseEmbeddingModel",
        "CLIPModel", "DeepseekOCRForCausalLM", "Eagle3Qwen2_5vlForCausalLM", "FlexOlmoForCausalLM",
        "KimiLinearForCausalLM", "Lfm2MoeForCausalLM", "LightOnOCRForConditionalGeneration",
        "MiniMaxM2ForCausalLM", "ModernBertForTokenClassification", "OpenPanguMTPModel",
        "OuroForCausalLM", "PaddleOCRVLForConditionalGeneration", "PanguEmbeddedForCausalLM",
        "PanguUltraMoEForCausalLM", "Qwen3OmniMoeForConditionalGeneration", "SiglipModel",
        "TransformersEmbeddingModel", "TransformersForSequenceClassification",
        "TransformersMoEEmbeddingModel", "TransformersMoEForCausalLM",
        "TransformersMoEForSequenceClassification", "TransformersMultiModalEmbeddingModel",
        "TransformersMultiModalForCausalLM", "TransformersMultiModalForSequenceClassification",
        "TransformersMultiModalMoEForCausalLM",
    ),
    "0.12.0": (
        "Eagle3Qwen3vlForCausalLM", "EagleMistralLarge3ForCausalLM",
        "HunYuanVLForConditionalGeneration", "MistralLarge3ForCausalLM",
        "OpenCUAForConditionalGeneration", "Plamo3ForCausalLM", "TeleChatForCausalLM",
    ),
    "0.13.0": (
        "AudioFlamingo3ForConditionalGeneration", "BagelForConditionalGeneration",
        "Jais2ForCausalLM",
    ),
    "0.14.0": (
        "ExaoneMoEForCausalLM", "ExaoneMoeMTP", "GlmAsrForConditionalGeneration",
        "Grok1ForCausalLM", "IQuestCoderForCausalLM", "IQuestLoopCoderForCausalLM",
        "IsaacForConditionalGeneration", "KananaVForConditionalGeneration",
        "Lfm2VlForConditionalGeneration", "LlamaBidirectionalForSequenceClassification",
        "LlamaBidirectionalModel", "MiMoV2FlashForCausalLM",
        "NemotronParseForConditionalGeneration", "PanguProMoEV2ForCausalLM",
        "VoxtralStreamingGeneration",
    ),
    "0.15.0": (
        "BgeM3EmbeddingModel", "Eagle2_5_VLForConditionalGeneration", "Glm4MoeLiteForCausalLM",
        "Glm4MoeLiteMTPModel", "KimiK25ForConditionalGeneration", "Molmo2ForConditionalGeneration",
        "Step1ForCausalLM", "StepVLForConditionalGeneration",
    ),
    "0.15.1": ("Step3p5ForCausalLM", "Step3p5MTP",),
    "0.16.0": (
        "DeepseekOCR2ForCausalLM", "FunAudioChatForConditionalGeneration", "GlmMoeDsaForCausalLM",
        "GlmOcrForConditionalGeneration", "GlmOcrMTPModel", "HF_ColBERT",
        "InternS1ProForConditionalGeneration", "MusicFlamingoForConditionalGeneration",
        "NemotronHPuzzleForCausalLM", "OpenPanguVLForConditionalGeneration",
        "Qwen3ASRForConditionalGeneration", "VoxtralRealtimeGeneration",
        "VoyageQwen3BidirectionalEmbedModel",
    ),
    "0.17.0": (
        "AXK1ForCausalLM", "BailingMoeV2_5ForCausalLM", "ColBERTJinaRobertaModel",
        "ColBERTModernBertModel", "ColModernVBertForRetrieval", "ColQwen3",
        "ExtractHiddenStatesModel", "FireRedASR2ForConditionalGeneration",
        "FunASRForConditionalGeneration", "LlamaNemotronVLForSequenceClassification",
        "LlamaNemotronVLModel", "NemotronHMTPModel", "OpsColQwen3Model", "Ovis2_6ForCausalLM",
        "Ovis2_6_MoeForCausalLM", "Qwen3ASRRealtimeGeneration", "Qwen3VLNemotronEmbedModel",
        "Qwen3_5ForConditionalGeneration", "Qwen3_5MTP", "Qwen3_5MoeForConditionalGeneration",
        "Qwen3_5MoeMTP",
    ),
    "0.18.0": (
        "ColPaliForRetrieval", "Eagle3DeepseekV2ForCausalLM", "Eagle3DeepseekV3ForCausalLM",
        "ErnieForSequenceClassification", "ErnieForTokenClassification", "ErnieModel",
        "HCXVisionV2ForCausalLM", "HyperCLOVAXForCausalLM", "MoonshotKimiaForCausalLM",
        "OlmoHybridForCausalLM", "SarvamMLAForCausalLM", "SarvamMoEForCausalLM",
    ),
    "0.19.0": (
        "CohereAsrForConditionalGeneration", "ColBERTLfm2Model", "ColQwen3_5", "Gemma4ForCausalLM",
        "Gemma4ForConditionalGeneration", "Qwen3ASRForcedAlignerForTokenClassification",
    ),
    "0.20.0": (
        "Cheers", "CheersForConditionalGeneration", "DFlashDraftModel", "DeepSeekV4MTPModel",
        "DeepseekV4ForCausalLM", "Eagle3MiniMaxM2ForCausalLM", "Exaone4_5_ForConditionalGeneration",
        "Exaone4_5_MTP", "FireRedLIDForConditionalGeneration",
        "Granite4VisionForConditionalGeneration", "HYV3ForCausalLM", "HYV3MTPModel",
        "JinaEmbeddingsV5Model", "JinaForRanking", "Ministral3ForCausalLM",
        "NemotronH_Nano_Omni_Reasoning_V3", "NemotronH_Super_Omni_Reasoning_V3",
        "Param2MoEForCausalLM", "Phi4ForCausalLMV", "Rnj1ForCausalLM", "TeleChat3ForCausalLM",
    ),
    "0.21.0": (
        "Cohere2MoeForCausalLM", "EagleCohereForCausalLM", "EagleMistralForCausalLM",
        "Gemma4MTPModel", "HfMoondream", "LagunaForCausalLM", "MiMoV2ForCausalLM", "MiMoV2MTPModel",
        "MiMoV2OmniForCausalLM", "MiMoV2OmniMTPModel", "Moondream3ForCausalLM",
        "QianfanOCRForConditionalGeneration",
    ),
    "0.22.0": (
        "InternS2PreviewForConditionalGeneration", "MiniCPMV4_6ForConditionalGeneration",
        "OpenVLAForActionPrediction", "PEagleDraftModel", "PeagleLlamaForCausalLM",
    ),
    "0.22.1": ("MellumForCausalLM",),
    "0.23.0": (
        "Cosmos3ForConditionalGeneration", "Gemma4UnifiedForConditionalGeneration",
        "GraniteSpeechPlusForConditionalGeneration", "Step3p7ForConditionalGeneration",
    ),
    "0.24.0": (
        "DiffusionGemmaForBlockDiffusion", "Eagle3Qwen3ForCausalLM", "HrmTextForCausalLM",
        "MiniMaxM3MTP", "MiniMaxM3SparseForCausalLM", "MiniMaxM3SparseForConditionalGeneration",
        "MossAudioModel", "PeagleQwen3ForCausalLM",
    ),
    "0.25.0": (
        "BailingMoeV25MTPModel", "DFlashLagunaForCausalLM", "DSparkDraftModel",
        "LlavaOnevision2ForConditionalGeneration", "MossTranscribeDiarizeForConditionalGeneration",
        "OpenAIPrivacyFilterForTokenClassification", "Qwen3DSparkModel", "UnlimitedOCRForCausalLM",
    ),
    "0.26.0": (
        "BertForMaskedLM", "Cosmos3EdgeForConditionalGeneration", "Gemma4DSparkModel",
        "InklingForCausalLM", "InklingForConditionalGeneration", "InklingMTPModel",
        "LongcatFlashNgramForCausalLM", "RobertaForTokenClassification",
        "XLMRobertaForTokenClassification",
    ),
    "0.27.0": (
        "ExaoneMoeForCausalLM", "K3DSparkModel", "KimiK3ForConditionalGeneration", "KimiK3MTPModel",
        "Qwen3_5ForCausalLM", "Qwen3_5MoeForCausalLM", "VaultGemmaForCausalLM",
        "VibeVoiceAsrForConditionalGeneration",
    ),
    "0.28.0": (
        "BailingMoeV3ForCausalLM", "BailingMoeV3MTPModel", "DFlash2DraftModel",
        "DFlashMuseGlimmerAssistantModel", "Dots3NoteForCausalLM", "Dots3NoteMTPModel",
        "InternS2MobiusForConditionalGeneration", "InternS2MobiusMTP", "MuseGlimmerAssistantModel",
        "MuseGlimmerForCausalLM", "MuseGlimmerForConditionalGeneration",
    ),
    "0.29.0": (
        "DeepseekV32MTPModel", "DeepseekV3BidirectionalModel", "GraniteMoeSWAForCausalLM",
        "GraniteSWAForCausalLM", "HYV4ForCausalLM", "HYV4MTPModel", "NemotronH_Omni_Reasoning_V3",
        "Qwen3OmniDSparkModel", "Qwen4ExpForCausalLM", "Qwen4ExpForConditionalGeneration",
        "Qwen4ExpMTP",
    ),
    "0.30.0": (
        "BailingMoeV3VLForConditionalGeneration", "CohereCompassForConditionalGeneration",
        "DSparkV41DraftModel", "DeepseekV41ForCausalLM", "DeepseekV4ForConditionalGeneration",
        "Glm5NextForCausalLM", "Glm5NextForConditionalGeneration", "Glm5NextMTPModel",
        "K2HorizonForCausalLM", "NanbeigeForCausalLM",
    ),
    "0.31.0": ("LiLiCorrDraftModel",),
    "0.32.0": (
        "ClefOmniForJointSchema", "EmbeddingGemma2Model", "MiniCPMV4_7ForConditionalGeneration",
    ),
    "0.33.0": (
        "AliceAIForCausalLM", "Alpamayo2Super", "BeamForCausalLM", "ClefFlashForJointSchema",
        "ColUltraVBertForRetrieval", "D3ForSequenceClassification", "DFlash2BeamDraftModel",
        "DFlashQwen3XPressModel", "DomynEdgeForCausalLM", "DoryForCausalLM", "FlintForCausalLM",
        "Kolibri1ForCausalLM", "Lfm2BidirectionalModel", "MiniCPMOcrForConditionalGeneration",
        "ModernVBertModel", "MuseSparkDSparkModel", "MuseSparkForConditionalGeneration",
        "ParseAuxMTPModel", "Qwen3XPressModel", "RadioMBartPrefixForCausalLM", "Step5ForCausalLM",
        "Step5ForConditionalGeneration", "Step5MTP", "TransformersForMTP", "TransformersMoEForMTP",
    ),
    "0.34.0": (
        "CanaryForConditionalGeneration", "DFlash2RicursiveDraftModel", "DSparkMiniMaxDraftModel",
        "KimiK31ForConditionalGeneration", "Lfm3AudioForConditionalGeneration", "Lfm3ForCausalLM",
        "Lfm3VlForConditionalGeneration", "MingV3ASRForConditionalGeneration",
        "MistralLarge4DSparkModel", "MistralLarge4ForCausalLM",
        "Nemotron3_5TranscribeForConditionalGeneration", "Nemotron3_5TranscribeMTPModel",
        "RicursiveForCausalLM", "UltraVBertModel", "UnlimitedOCR2TextForCausalLM",
        "ZayaForCausalLM",
    ),
}
# fmt: on

# sglang: the release that first lists each architecture (0.3.0-0.5.23 read).
# fmt: off
SGLANG_ARCHITECTURES_SINCE: dict[str, tuple[str, ...]] = {
    "0.3.0": (
        "ChatGLMForCausalLM", "ChatGLMModel", "CohereForCausalLM", "DbrxForCausalLM",
        "DeepseekForCausalLM", "DeepseekV2ForCausalLM", "ExaoneForCausalLM",
        "GPTBigCodeForCausalLM", "Gemma2ForCausalLM", "GemmaForCausalLM", "Grok1ForCausalLM",
        "Grok1ModelForCausalLM", "InternLM2ForCausalLM", "LlamaEmbeddingModel", "LlamaForCausalLM",
        "LlamaForClassification", "LlavaLlamaForCausalLM", "LlavaMistralForCausalLM",
        "LlavaQwenForCausalLM", "LlavaVidForCausalLM", "MiniCPMForCausalLM", "MistralForCausalLM",
        "MistralModel", "MixtralForCausalLM", "Phi3ForCausalLM", "QWenLMHeadModel",
        "QuantMixtralForCausalLM", "Qwen2ForCausalLM", "Qwen2MoeForCausalLM", "StableLmForCausalLM",
        "YiVLForCausalLM",
    ),
    "0.3.1": (
        "BaichuanForCausalLM", "MiniCPM3ForCausalLM", "XverseForCausalLM", "XverseMoeForCausalLM",
    ),
    "0.3.2": ("OlmoeForCausalLM",),
    "0.3.3": (
        "LlamaForSequenceClassification", "LlamaForSequenceClassificationWithNormal_Weights",
        "TorchNativeLlamaForCausalLM", "TorchNativePhi3ForCausalLM",
    ),
    "0.3.4": ("OlmoForCausalLM",),
    "0.3.5": (
        "GPT2LMHeadModel", "MllamaForConditionalGeneration", "Qwen2VLForConditionalGeneration",
    ),
    "0.3.6": (
        "Gemma2ForSequenceClassification", "InternLM2ForRewardModel", "Phi3SmallForCausalLM",
    ),
    "0.4.0": ("Olmo2ForCausalLM",),
    "0.4.1": ("DeepseekV3ForCausalLM", "GraniteForCausalLM",),
    "0.4.2": (
        "Cohere2ForCausalLM", "InternLM3ForCausalLM", "LlamaForCausalLMEagle", "MiniCPMV",
        "Qwen2ForCausalLMEagle",
    ),
    "0.4.4": (
        "DeepseekV3ForCausalLMNextN", "MultiModalityCausalLM", "Qwen2ForRewardModel",
        "Qwen2_5_VLForConditionalGeneration",
    ),
    "0.4.5": (
        "CLIPModel", "DeepseekVL2ForCausalLM", "Gemma3ForCausalLM",
        "Gemma3ForConditionalGeneration", "Llama4ForCausalLM", "Llama4ForConditionalGeneration",
        "LlamaForCausalLMEagle3", "MiniCPMO", "Qwen2ForSequenceClassification",
    ),
    "0.4.6": (
        "BertModel", "Contriever", "Qwen3ForCausalLM", "Qwen3MoeForCausalLM", "XLMRobertaModel",
    ),
    "0.4.7": (
        "InternVLChatModel", "KimiVLForConditionalGeneration", "LlavaForConditionalGeneration",
        "MiMoForCausalLM", "MiMoMTP", "Mistral3ForConditionalGeneration", "Phi4MMForCausalLM",
        "PixtralVisionModel", "TransformersForCausalLM",
    ),
    "0.4.8": (
        "BertForSequenceClassification", "Glm4ForCausalLM", "VILAForConditionalGeneration",
        "XLMRobertaForSequenceClassification",
    ),
    "0.4.9": (
        "Gemma3nForCausalLM", "Gemma3nForConditionalGeneration", "HunYuanMoEV1ForCausalLM",
        "Qwen2AudioForConditionalGeneration",
    ),
    "0.4.10": (
        "ArceeForCausalLM", "Glm4MoeForCausalLM", "Glm4MoeForCausalLMNextN",
        "GraniteMoeForCausalLM", "HunYuanDenseV1ForCausalLM", "InternS1ForConditionalGeneration",
        "PersimmonForCausalLM", "PhiForCausalLM", "PhiMoEForCausalLM",
        "Step3VLForConditionalGeneration",
    ),
    "0.5.1": (
        "BailingMoeForCausalLM", "DeciLMForCausalLM", "Ernie4_5_ForCausalLM",
        "Ernie4_5_MoeForCausalLM", "Ernie4_5_MoeForCausalLMMTP", "Glm4vForConditionalGeneration",
        "Glm4vMoeForConditionalGeneration", "GptOssForCausalLM", "Qwen3ForSequenceClassification",
    ),
    "0.5.2": (
        "LongcatFlashForCausalLM", "LongcatFlashForCausalLMNextN", "OPTForCausalLM",
        "Qwen3NextForCausalLM", "Qwen3NextForCausalLMMTP",
    ),
    "0.5.3": (
        "ApertusForCausalLM", "BailingMoEForCausalLM", "BailingMoeForCausalLMNextN",
        "BailingMoeV2ForCausalLM", "DeepseekV32ForCausalLM", "DotsOCRForCausalLM",
        "DotsVLMForCausalLM", "FalconH1ForCausalLM", "Qwen3VLForConditionalGeneration",
        "Qwen3VLMoeForConditionalGeneration", "Sarashina2VisionForCausalLM", "SolarForCausalLM",
        "Starcoder2ForCausalLM",
    ),
    "0.5.4": (
        "DeepseekOCRForCausalLM", "NemotronHForCausalLM", "POINTSV15ChatModel",
        "Qwen3OmniMoeForConditionalGeneration",
    ),
    "0.5.5": (
        "KimiLinearForCausalLM", "MiniMaxM2ForCausalLM", "NVILAForConditionalGeneration",
        "NVILALiteForConditionalGeneration",
    ),
    "0.5.6": (
        "JetNemotronForCausalLM", "JetVLMForConditionalGeneration", "LLaDA2MoeModelLM",
        "MindSporeForCausalLM", "NemotronH_Nano_VL_V2", "OrionForCausalLM", "TeleFLMForCausalLM",
    ),
    "0.5.7": (
        "GlmAsrForConditionalGeneration", "MiDashengLMModel", "MiMoV2FlashForCausalLM", "MiMoV2MTP",
        "Ministral3ForCausalLM", "MistralLarge3ForCausalLM", "MistralLarge3ForCausalLMEagle",
        "PaddleOCRVLForConditionalGeneration", "PixtralForConditionalGeneration",
    ),
    "0.5.8": (
        "AfmoeForCausalLM", "Glm4MoeLiteForCausalLM", "IQuestCoderForCausalLM",
        "IQuestLoopCoderForCausalLM", "NemotronHForCausalLMMTP",
    ),
    "0.5.9": (
        "BailingMoeV2_5ForCausalLM", "Ernie4_5_VLMoeForConditionalGeneration", "Exaone4ForCausalLM",
        "ExaoneMoEForCausalLM", "ExaoneMoEForCausalLMMTP", "GPTJForCausalLM",
        "GlmMoeDsaForCausalLM", "GlmOcrForConditionalGeneration",
        "GlmOcrForConditionalGenerationNextN", "GraniteMoeHybridForCausalLM",
        "InternS1ProForConditionalGeneration", "KimiK25ForConditionalGeneration", "Lfm2ForCausalLM",
        "Lfm2MoeForCausalLM", "LightOnOCRForConditionalGeneration", "Qwen3ForRewardModel",
        "Qwen3_5ForCausalLMMTP", "Qwen3_5ForConditionalGeneration",
        "Qwen3_5MoeForConditionalGeneration", "SDARForCausalLM", "SDARMoeForCausalLM",
        "Step3p5ForCausalLM", "Step3p5MTP", "StepVLForConditionalGeneration",
    ),
    "0.5.10": (
        "Lfm2VlForConditionalGeneration", "SarvamMLAForCausalLM", "SarvamMoEForCausalLM",
        "TransformersEmbeddingModel", "TransformersForSequenceClassification",
        "TransformersMoEEmbeddingModel", "TransformersMoEForCausalLM",
        "TransformersMoEForSequenceClassification", "TransformersMultiModalEmbeddingModel",
        "TransformersMultiModalForCausalLM", "TransformersMultiModalForSequenceClassification",
        "TransformersMultiModalMoEEmbeddingModel", "TransformersMultiModalMoEForCausalLM",
        "TransformersMultiModalMoEForSequenceClassification", "WhisperForConditionalGeneration",
    ),
    "0.5.11": (
        "DFlashDraftModel", "Gemma4ForCausalLM", "Gemma4ForConditionalGeneration",
        "HYV3ForCausalLM", "HYV3ForCausalLMNextN", "MiMoV2ForCausalLM", "MistralForCausalLMEagle",
        "MossVLForConditionalGeneration", "NemotronH_Nano_Omni_Reasoning_V3",
        "Qwen3ASRForConditionalGeneration", "VoxtralForConditionalGeneration",
    ),
    "0.5.12": (
        "DeepseekV4ForCausalLM", "DeepseekV4ForCausalLMNextN", "Eagle3DeepseekV2ForCausalLM",
        "Gemma4AssistantForCausalLM", "InternS2PreviewForConditionalGeneration",
        "LagunaForCausalLM", "MiniCPMV4_6ForConditionalGeneration",
    ),
    "0.5.13": (
        "Cohere2MoeForCausalLM", "Cohere2VisionForConditionalGeneration",
        "Gemma4UnifiedAssistantForCausalLM", "Gemma4UnifiedForConditionalGeneration",
        "Glm4MoeLiteForCausalLMNextN", "NemotronHPuzzleForCausalLM", "Qwen3MoeForCausalLMMTP",
        "Step3p7ForConditionalGeneration",
    ),
    "0.5.14": ("MiMoV2ASRForCausalLM", "ZayaForCausalLM",),
    "0.5.15": (
        "DFlashLagunaForCausalLM", "HrmTextForCausalLM", "LocateAnythingForConditionalGeneration",
        "UnlimitedOCRForCausalLM",
    ),
    "0.5.16": (
        "DeepseekV4ForCausalLMDSpark", "GlmImageForConditionalGeneration",
        "GlmMoeDsaForCausalLMNextN", "InklingForConditionalGeneration",
        "InklingForConditionalGenerationMTP", "MellumForCausalLM", "MiniMaxM3SparseForCausalLM",
        "MiniMaxM3SparseForConditionalGeneration", "Qwen3DSparkModel",
    ),
    "0.5.17": (
        "DSparkDraftModel", "EmbeddingGemmaModel", "KimiK3ForConditionalGeneration",
        "Lfm2BidirectionalModel", "Qwen3Model", "Qwen3_5ForCausalLM", "Qwen3_5MoeForCausalLM",
    ),
    "0.5.18": (
        "InternS2MobiusForConditionalGeneration", "MuseGlimmerAssistantModel",
        "MuseGlimmerForCausalLM", "MuseGlimmerForConditionalGeneration",
    ),
    "0.5.19": (
        "BailingMoeV3ForCausalLM", "DFlash2DraftModel", "Dots3NoteForCausalLM",
        "Dots3NoteForCausalLMNextN", "GraniteMoeSWAForCausalLM", "GraniteMoeSharedForCausalLM",
        "GraniteSWAForCausalLM", "KimiK3LinearForCausalLM", "Lfm2DSparkDraftModel",
        "LingDSparkModel", "MiniCPMSALAForCausalLM", "Spark2_5ForCausalLM",
    ),
    "0.5.20": (
        "Cosmos3EdgeForConditionalGeneration", "Cosmos3ForConditionalGeneration",
        "FalconMambaForCausalLM", "Glm5NextForConditionalGeneration",
        "Glm5NextForConditionalGenerationNextN", "HYV4ForCausalLM", "HYV4ForCausalLMNextN",
        "K2HorizonForCausalLM", "Mamba2ForCausalLM", "MambaForCausalLM", "NanbeigeForCausalLM",
        "NanbeigeForSequenceClassification", "NemotronH_Omni_Reasoning_V3",
        "Qwen4ExpForCausalLMMTP", "Qwen4ExpForConditionalGeneration", "XllmForCausalLM",
    ),
    "0.5.21": (
        "BailingMM2NativeForConditionalGeneration", "BailingMMNativeForConditionalGeneration",
        "BailingMoeV3VLForConditionalGeneration", "DiffusionGemmaForBlockDiffusion",
        "GigaChat35ForCausalLM", "GigaChat35ForCausalLMNextN", "IQuestQ1ForCausalLM", "IQuestQ1MTP",
        "LiLiCorrDraftModel",
    ),
    "0.5.22": ("EmbeddingGemma2Model", "ExaoneMoeForCausalLM",),
    "0.5.23": (
        "BeamForCausalLM", "DFlash2BeamDraftModel", "DSparkMiniMaxDraftModel",
        "MiniCPMV4_7ForConditionalGeneration", "MiniMaxDFlash2DraftModel",
        "MuseSparkForConditionalGeneration",
    ),
}
# fmt: on

_TABLES = {"vllm": VLLM_ARCHITECTURES_SINCE, "sglang": SGLANG_ARCHITECTURES_SINCE}
# The registry entry of each engine's Transformers-backend fallback (an architecture it does not
# implement runs on the transformers model class instead): vLLM's TransformersModel, SGLang's
# TransformersForCausalLM.
TRANSFORMERS_FALLBACK = {"vllm": "TransformersModel", "sglang": "TransformersForCausalLM"}


def native_since(engine: str, architecture: str) -> str | None:
    """The first release of `engine` whose registry lists `architecture` (None: none read)."""
    table = _TABLES.get(engine, {})
    return next((v for v, archs in table.items() if architecture in archs), None)


def registry_gap(
    engine: str, architecture: str | None, version: tuple[int, int, int]
) -> tuple[str, bool] | None:
    """Why `version` of `engine` has no native implementation of `architecture`, and whether
    that release refuses the model outright (no Transformers backend to fall back on yet); None
    where it has one, or where the engine or the release is not one whose registry was read."""
    table = _TABLES.get(engine)
    if table is None or not architecture:
        return None
    name = ENGINE_NAMES[engine]
    since = native_since(engine, architecture)
    newest = max(table, key=parse_version)
    if since is not None and version >= parse_version(since):
        return None
    if since is None and version <= parse_version(newest):
        missing = f"no release through {newest} lists {architecture} in its model registry"
    elif since is None:
        return None  # a release newer than any read: it may well list it
    else:
        missing = f"{name} {'.'.join(map(str, version))} has no {architecture} (first in {since})"
    fallback = native_since(engine, TRANSFORMERS_FALLBACK[engine])
    if fallback is None or version < parse_version(fallback):
        return f"{missing}: {name} refuses the model", True
    return (
        f"{missing}: {name} refuses the model, or runs it through its Transformers backend where "
        "the installed transformers implements it; the plan is of the native implementation",
        False,
    )
